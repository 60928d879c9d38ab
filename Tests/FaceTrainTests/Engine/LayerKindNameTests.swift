import Testing

@testable import FaceTrainEngine

/// Layer kinds are compared as `LayerKindName`s; their raw values are the names in files already
/// written (weights.h5 groups, parameter keys, manifest layer names), so those never change.
@Suite struct LayerKindNameTests {
    @Test func everyKindKeepsTheNameItHasInFiles() {
        #expect(
            LayerSpecification.everyKind.map(\.kind.rawValue)
                == [
                    "conv2d", "batchnorm2d", "relu", "maxpool2d", "globalavgpool", "l2normalize", "linear", "dropout",
                    "add", "prelu", "route", "upsample",
                ])
        // One name per kind: no two kinds share a name, and no name is left without a kind.
        #expect(LayerSpecification.everyKind.map(\.kind) == LayerKindName.allCases)
    }

    /// Interpolating a kind writes its file name, not the Swift case name ("conv2D").
    @Test func layerNamesAndMessagesSpellTheFileName() {
        let definition = TestData.tinyDefinition(neck: true)
        #expect(
            definition.layerNames
                == [
                    "0.conv2d", "1.batchnorm2d", "2.relu", "3.maxpool2d", "4.conv2d", "5.batchnorm2d", "6.relu",
                    "7.conv2d", "8.batchnorm2d", "9.relu", "10.globalavgpool", "11.batchnorm2d", "12.l2normalize",
                    "13.linear",
                ])
        #expect("\(LayerKindName.globalAveragePool)" == "globalavgpool")
        let problem = ModelDefinitionError.invalidLayer(index: 3, kind: .maxPool2D, reason: "too small")
        #expect(problem.description.hasPrefix("Model definition: layer 3 (maxpool2d): too small."))
    }

    @Test func kindsAreFoundByCaseNotByString() {
        let definition = TestData.tinyDefinition(neck: true)
        #expect(definition.layers.lastIndex { $0.kind == .l2Normalize } == 12)
        #expect(definition.layers.filter { $0.kind == .batchNorm2D }.count == 4)
        #expect(!definition.layers.contains { $0.kind == .add || $0.kind == .prelu })
    }
}
