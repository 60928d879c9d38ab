import FaceTrainTestSupport
import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

@Suite("weights.h5")
struct WeightsFileTests {
    @Test func roundTripGivesIdenticalTensors() throws {
        let directory = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let model = BundleFixture.model(seed: 42)
        let url = directory.appendingPathComponent("weights.h5")
        try WeightsFile.write(model, to: url)
        let read = try WeightsFile.read(from: url, definition: model.definition)
        #expect(read == model.weights)
        #expect(read.count == model.definition.layers.count)
        let linear = try #require(read.last?.tensors.first)
        #expect(linear.name == "weight")
        #expect(linear.tensor.shape == [4, 32])
    }

    @Test func sameModelGivesIdenticalBytes() throws {
        let directory = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = directory.appendingPathComponent("a.h5")
        let second = directory.appendingPathComponent("b.h5")
        try WeightsFile.write(BundleFixture.model(seed: 7), to: first)
        Thread.sleep(forTimeInterval: 1.1)  // would change any stored timestamp
        try WeightsFile.write(BundleFixture.model(seed: 7), to: second)
        #expect(try Data(contentsOf: first) == Data(contentsOf: second))
        let third = directory.appendingPathComponent("c.h5")
        try WeightsFile.write(BundleFixture.model(seed: 8), to: third)
        #expect(try Data(contentsOf: first) != Data(contentsOf: third))
    }

    @Test func h5dumpReadsLayoutAndAttributes() throws {
        let directory = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("weights.h5")
        try WeightsFile.write(BundleFixture.model(), to: url)
        let dump = try BundleFixture.run("/usr/bin/h5dump", ["-H", url.path])
        #expect(dump.status == 0)
        #expect(dump.output.contains("GROUP \"0.conv2d\""))
        #expect(dump.output.contains("DATASET \"running_var\""))
        #expect(dump.output.contains("SIMPLE { ( 4, 3, 3, 3 ) / ( 4, 3, 3, 3 ) }"))
        #expect(dump.output.contains("SIMPLE { ( 4, 32 ) / ( 4, 32 ) }"))
        #expect(dump.output.contains("ATTRIBUTE \"layer_names\""))
        #expect(dump.output.contains("ATTRIBUTE \"weight_names\""))
        #expect(dump.output.contains("H5T_IEEE_F32LE"))
        let values = try BundleFixture.run("/usr/bin/h5dump", ["-a", "/class_labels", url.path])
        #expect(values.output.contains("\"1\", \"2\", \"17\", \"23\""))
        let tree = try BundleFixture.run("/usr/bin/h5ls", ["-r", url.path])
        #expect(tree.output.contains("/18.linear/weight"))
    }

    @Test func misShapedDatasetIsNamed() throws {
        let directory = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("weights.h5")
        try WeightsFile.write(BundleFixture.model(users: [17, 23, 31]), to: url)
        let expected = BundleFixture.model(users: [17, 23]).definition
        #expect {
            try WeightsFile.read(from: url, definition: expected)
        } throws: { error in
            "\(error)".contains("18.linear/weight") && "\(error)".contains("[5, 32]") && "\(error)".contains("[4, 32]")
        }
    }

    /// New files hold fixed-length strings (a damaged variable-length one crashed libhdf5); bundles
    /// written before with variable-length strings must still read.
    @Test func fixedAndVariableLengthStringsBothRead() throws {
        let directory = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("strings.h5")
        let names = ["1", "2", "17", "Zoë", ""]
        let read = try HDF5File.withLibrary {
            let file = try HDF5File.create(at: url.path)
            try file.root.writeStrings("fixed", names)
            try file.root.writeVariableLengthStrings("variable", names)
            try file.root.writeString("scalar", "ref-small")
            try file.close()
            let opened = try HDF5File.open(at: url.path)
            defer { try? opened.close() }
            return try ["fixed", "variable", "scalar"].map { try opened.root.readStrings($0) }
        }
        #expect(read == [names, names, ["ref-small"]])
        let dump = try BundleFixture.run("/usr/bin/h5dump", ["-A", url.path])
        #expect(dump.output.contains("STRSIZE 5;") && dump.output.contains("STRSIZE H5T_VARIABLE;"))
    }

    /// libhdf5 opens files without close-on-exec: a child spawned while one is open keeps its
    /// descriptor after the file is closed here. With libhdf5's own flock that child held the lock
    /// and the next open failed ("unable to lock file, errno = 11", seen when the parallel tests
    /// spawned h5dump and Python); facetrain switches that lock off.
    @Test func aChildHoldingTheDescriptorDoesNotLockTheFileOut() throws {
        let directory = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("weights.h5")
        var child = pid_t()
        try HDF5File.withLibrary {
            let file = try HDF5File.create(at: url.path)
            try file.root.writeStrings("layer_names", ["a", "b"])
            // posix_spawn without file actions: the child inherits every descriptor without close-on-exec.
            let arguments: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("3"), nil]
            defer { for argument in arguments { free(argument) } }
            #expect(posix_spawn(&child, "/bin/sleep", nil, nil, arguments, environ) == 0)
            try file.close()
        }
        defer {
            kill(child, SIGKILL)
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }
        let names = try HDF5File.withLibrary {
            let file = try HDF5File.open(at: url.path)
            defer { try? file.close() }
            return try file.root.readStrings("layer_names")
        }
        #expect(names == ["a", "b"])
    }

    @Test func missingDatasetIsNamed() throws {
        let directory = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("weights.h5")
        let model = BundleFixture.model()
        // A file with every group but no running_var in the first batch norm.
        try HDF5File.withLibrary {
            let file = try HDF5File.create(at: url.path)
            try file.root.writeInt32s("format_version", [1], scalar: true)
            try file.root.writeStrings("layer_names", model.definition.layerNames)
            for (name, layer) in zip(model.weights, model.definition.layers) {
                let group = try file.root.createGroup(name.name)
                for (tensor, spec) in zip(name.tensors, layer.parameterShapes)
                where !(name.name == "1.batchnorm2d" && spec.name == "running_var") {
                    try group.writeDataset(tensor.name, shape: tensor.tensor.shape, scalars: tensor.tensor.scalars)
                }
            }
            try file.close()
        }
        #expect(
            throws: WeightsFileError.missingTensor(file: "weights.h5", layer: "1.batchnorm2d", tensor: "running_var")
        ) {
            try WeightsFile.read(from: url, definition: model.definition)
        }
    }

    @Test func otherArchitectureAndNonHDF5AreRefused() throws {
        let directory = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("weights.h5")
        try WeightsFile.write(BundleFixture.model(), to: url)
        var other = BundleFixture.model().definition
        other.layers.insert(.dropout(rate: 0.5), at: 14)
        #expect { try WeightsFile.read(from: url, definition: other) } throws: { error in
            if case .architectureMismatch = error as? WeightsFileError { return true }
            return false
        }
        let text = directory.appendingPathComponent("text.h5")
        try Data("not hdf5".utf8).write(to: text)
        #expect { try WeightsFile.read(from: text, definition: other) } throws: { "\($0)".contains("not an HDF5 file") }
    }

    @Test func writerRefusesWeightsThatDoNotMatchTheDefinition() throws {
        let directory = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var model = BundleFixture.model()
        model.weights[0].tensors[0].tensor = Tensor(zeros: [4, 3, 5, 5])
        #expect { try WeightsFile.write(model, to: directory.appendingPathComponent("w.h5")) } throws: { error in
            "\(error)".contains("0.conv2d/weight")
        }
    }

    @Test func acceptsWeightsListingOnlyLayersWithParameters() throws {
        let directory = BundleFixture.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var model = BundleFixture.model()
        let full = model.weights
        model.weights = model.weights.filter { !$0.tensors.isEmpty }
        let url = directory.appendingPathComponent("w.h5")
        try WeightsFile.write(model, to: url)
        #expect(try WeightsFile.read(from: url, definition: model.definition) == full)
    }
}
