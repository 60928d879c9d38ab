import Foundation
import Testing

@testable import FaceTrainSynthesis

// Tests of the detector scenes (`SyntheticScenes`): determinism, faces_in_photos' format, boxes and
// landmarks inside the photo, and landmarks that sit on the drawn eyes, nose and mouth. Not the crops.

@Suite struct SyntheticScenesTests {
    typealias Support = SynthesisTestSupport

    private func configuration(_ output: URL, seed: UInt64 = 5, count: Int = 8) -> SceneConfiguration {
        SceneConfiguration(outputDirectory: output, sceneCount: count, seed: seed, maximumSide: 160)
    }

    @Test func sameSeedGivesByteIdenticalFilesAndAnotherSeedDoesNot() throws {
        let first = Support.temporaryPath("scenes")
        let second = Support.temporaryPath("scenes")
        let other = Support.temporaryPath("scenes")
        defer { [first, second, other].forEach(Support.removeTemporary) }
        _ = try SyntheticScenes.generate(configuration: configuration(first))
        _ = try SyntheticScenes.generate(configuration: configuration(second))
        _ = try SyntheticScenes.generate(configuration: configuration(other, seed: 6))
        let firstFiles = try Support.files(in: first)
        #expect(firstFiles.count == 8 + 3)
        #expect(firstFiles == (try Support.files(in: second)))
        let otherFiles = try Support.files(in: other)
        let images = firstFiles.keys.filter { $0.hasSuffix(".jpg") }
        #expect(images.allSatisfy { otherFiles[$0] != firstFiles[$0] }, "every photo should change with the seed")
    }

    @Test func writesFacesInPhotosFormat() throws {
        let output = Support.temporaryPath("scenes")
        defer { Support.removeTemporary(output) }
        let summary = try SyntheticScenes.generate(configuration: configuration(output, count: 10))
        let text = try String(contentsOf: output.appendingPathComponent("annotations.jsonl"), encoding: .utf8)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(text.hasSuffix("\n"))
        #expect(lines.count == 10)
        var files: [String] = []
        for line in lines {
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(Set(object.keys) == ["file", "width", "height", "source_size", "faces"])
            // faces_in_photos' key order, checked on the text itself.
            #expect(line.hasPrefix("{\"file\":\"images/0--Synthetic/"))
            let file = try #require(object["file"] as? String)
            let width = try #require(object["width"] as? Int)
            let height = try #require(object["height"] as? Int)
            #expect(object["source_size"] as? [Int] == [width, height])
            #expect(max(width, height) == 160)
            let jpeg = try Data(contentsOf: output.appendingPathComponent(file))
            let decoded = try #require(Support.decodeJPEG(jpeg))
            #expect(decoded.width == width && decoded.height == height)
            for face in try #require(object["faces"] as? [[String: Any]]) {
                #expect(
                    Array(face.keys).sorted() == [
                        "blur", "box", "expression", "illumination", "invalid", "landmarks5", "landmarks5_score",
                        "occlusion", "pose",
                    ])
                #expect((face["box"] as? [Double])?.count == 4)
                let points = try #require(face["landmarks5"] as? [[Double]])
                #expect(points.count == 5 && points.allSatisfy { $0.count == 2 })
                #expect(face["landmarks5_score"] as? Double == 1.0)
                for key in ["blur", "expression", "illumination", "invalid", "occlusion", "pose"] {
                    let value = try #require(face[key] as? Int)
                    #expect((0...2).contains(value))
                }
            }
            files.append(file)
        }
        #expect(files == files.sorted())
        #expect(files == summary.annotations.map(\.file))
        #expect(text.contains("\"pose\":0,\"landmarks5\":[["), "keys of a face are in faces_in_photos' order")

        let splits = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: output.appendingPathComponent("splits.json")))
                as? [String: [String]])
        #expect(Set(splits.keys) == ["train", "dev"])
        let train = try #require(splits["train"])
        let dev = try #require(splits["dev"])
        #expect(dev.count == 2)
        #expect(Set(train).isDisjoint(with: dev))
        #expect((train + dev).sorted() == files)
        let readme = try String(contentsOf: output.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains("landmarks5"))
    }

    @Test func boxesLieInsideThePhotoAndLandmarksInsideTheirBox() throws {
        var faceCount = 0
        var emptyScenes = 0
        var heights: [Double] = []
        for index in 0..<60 {
            let annotation = SyntheticScenes.render(index: index, seed: 11, maximumSide: 320).annotation
            if annotation.faces.isEmpty { emptyScenes += 1 }
            #expect(annotation.faces.count <= SyntheticScenes.maximumFacesPerScene)
            for (number, face) in annotation.faces.enumerated() {
                faceCount += 1
                let box = face.box
                heights.append(box[3])
                #expect(box[0] >= 0 && box[1] >= 0 && box[2] > 0 && box[3] > 0)
                #expect(box[0] + box[2] <= Double(annotation.width) && box[1] + box[3] <= Double(annotation.height))
                for point in face.landmarks {
                    #expect(point[0] > box[0] && point[0] < box[0] + box[2], "\(annotation.file) face \(number)")
                    #expect(point[1] > box[1] && point[1] < box[1] + box[3], "\(annotation.file) face \(number)")
                }
                // Image left first: the person's right eye and right mouth corner.
                #expect(face.landmarks[0][0] < face.landmarks[1][0] && face.landmarks[3][0] < face.landmarks[4][0])
                for other in annotation.faces[(number + 1)...] {
                    #expect(Self.intersectionOverUnion(box, other.box) < 0.3)
                }
            }
        }
        #expect(faceCount > 60, "about 3 faces a scene are expected, got \(faceCount) in 60")
        #expect(emptyScenes > 0, "some scenes should have no face")
        // Log-uniform 20-200 px capped at 60 % of the shorter side (roll adds a little).
        #expect(heights.min() ?? 0 >= 19 && heights.max() ?? 0 <= 200)
        #expect(heights.contains { $0 < 30 } && heights.contains { $0 > 90 })
    }

    /// Repaints real scene layouts on a plain grey canvas with lighting off, eyes open and looking straight,
    /// no glasses, beard, mole, blush or open mouth, so each landmark's pixel can be told from the features it should
    /// sit on; the points come from the same annotation code the generator writes.
    @Test func landmarksLandOnTheDrawnFeatures() throws {
        var checked = 0
        for index in 0..<40 {
            let plan = SyntheticScenes.plan(index: index, seed: 21, maximumSide: 640)
            let people = plan.people.map { person -> ScenePerson in
                var identity = person.identity
                identity.facialHair = nil
                identity.mole = nil
                identity.blush = 0
                var conditions = person.conditions
                conditions.lightStrength = 0
                conditions.blink = false
                conditions.wearsGlasses = false
                conditions.gaze = Point(0, 0)
                conditions.mouthOpen = 0
                return ScenePerson(
                    identity: identity, conditions: conditions, view: person.view, grainSeed: person.grainSeed)
            }
            var canvas = SyntheticScenes.canvas(for: plan)
            canvas.shade { _, _, _ in Color(0.5, 0.5, 0.5) }
            SyntheticScenes.paint(people, on: &canvas)
            for person in people {
                let face = SyntheticScenes.face(of: person, in: plan)
                // Below 70 px the pupil and the lip line cover too few canvas pixels to sample reliably.
                guard face.box[3] >= 70 else { continue }
                checked += 1
                let skin = person.identity.skin
                let skinLuminance = Self.luminance(skin)
                for eye in face.landmarks[0...1] {
                    let pixel = Self.pixel(canvas, eye)
                    // The pupil (0.04, 0.03, 0.03) is centred on the eye when the gaze is straight.
                    #expect(pixel.red < 0.08 && pixel.green < 0.08 && pixel.blue < 0.08, "eye at \(eye): \(pixel)")
                }
                for (corner, side) in [(face.landmarks[3], Float(-1)), (face.landmarks[4], 1)] {
                    let darkest = Self.neighbourhood(canvas, corner).map(Self.luminance).min() ?? 1
                    #expect(darkest < 0.9 * skinLuminance, "mouth corner at \(corner) is not on the lip line")
                    // A little further out the cheek is bare skin: the point is the end of the mouth.
                    let faceSpace = person.view.facePoint(
                        column: Float(corner[0]) * 2, row: Float(corner[1]) * 2)
                    let outside = person.view.canvasPoint(faceSpace + Point(side * 0.05, 0))
                    let cheek = Self.pixel(canvas, [Double(outside.x) / 2, Double(outside.y) / 2])
                    #expect(abs(Self.luminance(cheek) - skinLuminance) < 0.03, "beyond mouth corner \(corner)")
                }
                // The nose tip sits between the nostrils, the darkest spots around it, and just above them.
                let tip = person.view.facePoint(
                    column: Float(face.landmarks[2][0]) * 2, row: Float(face.landmarks[2][1]) * 2)
                let width = person.identity.noseWidth
                var sum = Point(0, 0)
                var count: Float = 0
                for row in 0..<canvas.height {
                    for column in 0..<canvas.width {
                        let point = person.view.facePoint(column: Float(column) + 0.5, row: Float(row) + 0.5)
                        // Wide enough for both nostrils, short of the eyes above and the upper lip below.
                        guard abs(point.x - tip.x) < width * 0.6, point.y > tip.y - width * 0.3,
                            point.y < tip.y + width * 0.45
                        else { continue }
                        let offset = (row * canvas.width + column) * 3
                        let color = Color(canvas.pixels[offset], canvas.pixels[offset + 1], canvas.pixels[offset + 2])
                        if Self.luminance(color) < 0.5 * skinLuminance {
                            sum = sum + point
                            count += 1
                        }
                    }
                }
                #expect(count > 4, "no nostrils found around the nose tip")
                let nostrils = sum * (1 / max(1, count))
                #expect(abs(nostrils.x - tip.x) < 0.015, "nose tip is not centred over the nostrils")
                #expect(
                    nostrils.y > tip.y && nostrils.y < tip.y + width * 0.4, "nose tip is not just above the nostrils")
            }
        }
        #expect(checked >= 10, "only \(checked) faces of 70 px or more were drawn")
    }

    private static func pixel(_ canvas: Canvas, _ point: [Double]) -> Color {
        let column = min(canvas.width - 1, max(0, Int(point[0] * 2)))
        let row = min(canvas.height - 1, max(0, Int(point[1] * 2)))
        let offset = (row * canvas.width + column) * 3
        return Color(canvas.pixels[offset], canvas.pixels[offset + 1], canvas.pixels[offset + 2])
    }

    /// The four canvas pixels whose centres surround `point`.
    private static func neighbourhood(_ canvas: Canvas, _ point: [Double]) -> [Color] {
        [(-0.25, -0.25), (0.25, -0.25), (-0.25, 0.25), (0.25, 0.25)].map { dx, dy in
            pixel(canvas, [point[0] + dx, point[1] + dy])
        }
    }

    private static func luminance(_ color: Color) -> Float {
        0.299 * color.red + 0.587 * color.green + 0.114 * color.blue
    }

    private static func intersectionOverUnion(_ first: [Double], _ second: [Double]) -> Double {
        let width = max(0, min(first[0] + first[2], second[0] + second[2]) - max(first[0], second[0]))
        let height = max(0, min(first[1] + first[3], second[1] + second[3]) - max(first[1], second[1]))
        let intersection = width * height
        return intersection / (first[2] * first[3] + second[2] * second[3] - intersection)
    }
}
