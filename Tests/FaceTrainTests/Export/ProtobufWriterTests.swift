import Testing

@testable import FaceTrain

/// Wire-format details, with expected bytes worked out by hand from the protobuf encoding rules
/// (protobuf.dev/programming-guides/encoding) and checked against the format reference files.
struct ProtobufWriterTests {
    static func encoded(_ build: (inout ProtobufWriter) -> Void) -> [UInt8] {
        var writer = ProtobufWriter()
        build(&writer)
        return writer.bytes
    }

    @Test func varints() {
        let cases: [(UInt64, [UInt8])] = [
            (0, [0x00]),
            (1, [0x01]),
            (127, [0x7F]),
            (128, [0x80, 0x01]),
            (300, [0xAC, 0x02]),
            (1004, [0xEC, 0x07]),
            (UInt64.max, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]),
        ]
        for (value, expected) in cases {
            #expect(Self.encoded { $0.writeVarint(value) } == expected, "varint \(value)")
        }
    }

    @Test func keysCombineFieldNumberAndWireType() {
        #expect(Self.encoded { $0.writeKey(1, .varint) } == [0x08])
        #expect(Self.encoded { $0.writeKey(403, .lengthDelimited) } == [0x9A, 0x19])
        #expect(Self.encoded { $0.writeKey(22, .fixed32) } == [0xB5, 0x01])
        #expect(Self.encoded { $0.writeKey(1, .fixed64) } == [0x09])
    }

    @Test func defaultsAreSkippedUnlessAlwaysIsSet() {
        #expect(Self.encoded { $0.writeUnsigned(1, 0) }.isEmpty)
        #expect(Self.encoded { $0.writeSigned(1, 0) }.isEmpty)
        #expect(Self.encoded { $0.writeBool(70, false) }.isEmpty)
        #expect(Self.encoded { $0.writeFloat(10, 0) }.isEmpty)
        #expect(Self.encoded { $0.writeString(1, "") }.isEmpty)
        #expect(Self.encoded { $0.writeUnsigned(1, 0, always: true) } == [0x08, 0x00])
        #expect(Self.encoded { $0.writeString(1, "", always: true) } == [0x0A, 0x00])
        // -0.0 is not the default value: its bits are not zero.
        #expect(Self.encoded { $0.writeFloat(10, -0.0) } == [0x55, 0x00, 0x00, 0x00, 0x80])
    }

    @Test func negativeIntegersAreSignExtendedToTenBytes() {
        #expect(
            Self.encoded { $0.writeSigned(1, -1) }
                == [0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
    }

    @Test func scalarsAreLittleEndian() {
        #expect(Self.encoded { $0.writeFloat(10, Float(1.0 / 127.5)) } == [0x55, 0x81, 0x80, 0x00, 0x3C])
        #expect(Self.encoded { $0.writeBool(70, true) } == [0xB0, 0x04, 0x01])
        #expect(
            Self.encoded { $0.writeDouble(1, 1.0) } == [0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF0, 0x3F])
    }

    @Test func stringsAreUTF8WithByteLength() {
        #expect(Self.encoded { $0.writeString(1, "Zoë") } == [0x0A, 0x04, 0x5A, 0x6F, 0xC3, 0xAB])
    }

    @Test func nestedMessagesWithPackedFloats() {
        // Message 91 holding packed floats in field 1 (a bias of four floats): 0xDA 0x05 is field 91,
        // length 18; 0x0A 0x10 is field 1, 16 little-endian bytes.
        let bytes = Self.encoded { writer in
            writer.writeMessage(91) { $0.writePackedFloats(1, [0.55, 0.1, -0.35, 0.35]) }
        }
        #expect(
            bytes == [
                0xDA, 0x05, 0x12, 0x0A, 0x10, 0xCD, 0xCC, 0x0C, 0x3F, 0xCD, 0xCC, 0xCC, 0x3D, 0x33, 0x33, 0xB3, 0xBE,
                0x33, 0x33, 0xB3, 0x3E,
            ])
    }

    @Test func emptyMessagesAreStillWritten() {
        // activation { ReLU {} }: an empty message inside a message.
        #expect(
            Self.encoded { w in w.writeMessage(130) { $0.writeMessage(10) { _ in } } } == [
                0x92, 0x08, 0x02, 0x52, 0x00,
            ])
    }

    @Test func packedVarints() {
        #expect(Self.encoded { $0.writePackedUnsigned(20, [3, 3]) } == [0xA2, 0x01, 0x02, 0x03, 0x03])
        #expect(Self.encoded { $0.writePackedUnsigned(20, [300]) } == [0xA2, 0x01, 0x02, 0xAC, 0x02])
        #expect(Self.encoded { $0.writePackedUnsigned(20, []) }.isEmpty)
    }

    @Test func longMessagesGetMultiByteLengths() {
        let values = [Float](repeating: 1, count: 100)
        let bytes = Self.encoded { $0.writeFloatBytes(9, values) }
        #expect(Array(bytes.prefix(3)) == [0x4A, 0x90, 0x03])
        #expect(bytes.count == 3 + 400)
        #expect(Array(bytes.suffix(4)) == [0x00, 0x00, 0x80, 0x3F])
    }

    @Test func labelsBecomeAPythonStyleJSONArray() {
        #expect(ONNXExporter.jsonArray(["1", "2", "17"]) == #"["1", "2", "17"]"#)
        #expect(
            ONNXExporter.jsonArray(["a\"b", "c\\d", "Zoë", "tab\there\n", "\u{01}"])
                == #"["a\"b", "c\\d", "Zoë", "tab\there\n", "\u0001"]"#)
        #expect(ONNXExporter.jsonArray([]) == "[]")
    }
}
