/// A minimal protocol-buffers wire-format writer, shared by the Core ML and ONNX encoders.
///
/// Fields are written in the order the caller writes them; the encoders follow ascending field
/// numbers, as the C++ and Python serializers do, so files compare byte for byte with theirs.
/// Scalar writers skip default values (proto3 presence) unless `always` is set (proto2 fields
/// that were set, as ONNX writes them). Sub-messages are encoded into their own buffer and
/// then copied in with their length, which is fast enough for models of a few megabytes.
struct ProtobufWriter {
    /// The protobuf wire types.
    enum WireType: UInt64 {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
        case fixed32 = 5
    }

    /// The encoded message so far.
    private(set) var bytes: [UInt8] = []

    init() {}

    /// Appends a base-128 varint, least-significant group first.
    mutating func writeVarint(_ value: UInt64) {
        var remaining = value
        while remaining >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: remaining) | 0x80)
            remaining >>= 7
        }
        bytes.append(UInt8(remaining))
    }

    /// Appends a field key: `(field << 3) | wireType`.
    mutating func writeKey(_ field: Int, _ wireType: WireType) {
        writeVarint(UInt64(field) << 3 | wireType.rawValue)
    }

    /// An unsigned varint field (uint32/uint64, or an enum whose values are not negative).
    mutating func writeUnsigned(_ field: Int, _ value: UInt64, always: Bool = false) {
        guard always || value != 0 else { return }
        writeKey(field, .varint)
        writeVarint(value)
    }

    /// A signed int32/int64/enum field: negative values are sign-extended to ten bytes (no zigzag).
    mutating func writeSigned(_ field: Int, _ value: Int64, always: Bool = false) {
        guard always || value != 0 else { return }
        writeKey(field, .varint)
        writeVarint(UInt64(bitPattern: value))
    }

    /// A bool field, written as varint 0 or 1.
    mutating func writeBool(_ field: Int, _ value: Bool, always: Bool = false) {
        guard always || value else { return }
        writeKey(field, .varint)
        writeVarint(value ? 1 : 0)
    }

    /// A float field: four bytes, little-endian IEEE 754. Only +0.0 counts as the default.
    mutating func writeFloat(_ field: Int, _ value: Float, always: Bool = false) {
        guard always || value.bitPattern != 0 else { return }
        writeKey(field, .fixed32)
        appendLittleEndian(value.bitPattern)
    }

    /// A double field: eight bytes, little-endian IEEE 754. Only +0.0 counts as the default.
    mutating func writeDouble(_ field: Int, _ value: Double, always: Bool = false) {
        guard always || value.bitPattern != 0 else { return }
        writeKey(field, .fixed64)
        appendLittleEndian(value.bitPattern)
    }

    /// A string field, UTF-8 encoded.
    mutating func writeString(_ field: Int, _ value: String, always: Bool = false) {
        guard always || !value.isEmpty else { return }
        writeBytes(field, Array(value.utf8), always: true)
    }

    /// A bytes field.
    mutating func writeBytes(_ field: Int, _ value: [UInt8], always: Bool = false) {
        guard always || !value.isEmpty else { return }
        writeKey(field, .lengthDelimited)
        writeVarint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A bytes field holding float32 values little-endian, back to back (ONNX `raw_data`).
    mutating func writeFloatBytes(_ field: Int, _ values: [Float], always: Bool = false) {
        guard always || !values.isEmpty else { return }
        writeKey(field, .lengthDelimited)
        writeVarint(UInt64(values.count * 4))
        appendFloats(values)
    }

    /// A packed repeated float field (one key, byte length, values); nothing when empty.
    mutating func writePackedFloats(_ field: Int, _ values: [Float]) {
        writeFloatBytes(field, values)
    }

    /// A packed repeated varint field (proto3 repeated integers); nothing when empty.
    mutating func writePackedUnsigned(_ field: Int, _ values: [UInt64]) {
        guard !values.isEmpty else { return }
        var packed = ProtobufWriter()
        for value in values { packed.writeVarint(value) }
        writeBytes(field, packed.bytes, always: true)
    }

    /// An embedded message, always written (an empty message that is set still costs key and length 0).
    mutating func writeMessage(_ field: Int, _ build: (inout ProtobufWriter) throws -> Void) rethrows {
        var child = ProtobufWriter()
        try build(&child)
        writeBytes(field, child.bytes, always: true)
    }

    private mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private mutating func appendFloats(_ values: [Float]) {
        #if _endian(little)
            values.withUnsafeBytes { bytes.append(contentsOf: $0) }
        #else
            bytes.reserveCapacity(bytes.count + values.count * 4)
            for value in values { appendLittleEndian(value.bitPattern) }
        #endif
    }
}
