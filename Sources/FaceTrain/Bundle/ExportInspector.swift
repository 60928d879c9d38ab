import Foundation

/// Reads back, from exported Core ML and ONNX files, the class labels and metadata that
/// verification compares with the manifest. Parses the protobuf wire format, so a label is only
/// found where the model keeps labels, not anywhere in the bytes.
public enum ExportInspector {
    /// What an export says about itself.
    public struct Contents: Sendable, Equatable {
        /// Class labels in output order; nil when the file has none.
        public var classLabels: [String]?
        /// Free-form metadata (Core ML `userDefined`, ONNX `metadata_props`).
        public var metadata: [String: String]
    }

    /// Why an export could not be read.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Core ML: Model.description(2).metadata(100).userDefined(100) entries, and
    /// Model.neuralNetworkClassifier(403).stringClassLabels(100).vector(1) or int64ClassLabels(101).
    public static func coreML(_ data: Data) throws -> Contents {
        let model = try fields(of: Array(data))
        var metadata: [String: String] = [:]
        for description in model.messages(2) {
            for meta in try fields(of: description).messages(100) {
                for entry in try fields(of: meta).messages(100) {
                    let pair = try fields(of: entry)
                    if let key = pair.strings(1).first { metadata[key] = pair.strings(2).first ?? "" }
                }
            }
        }
        var labels: [String]?
        for classifier in model.messages(403) {
            let body = try fields(of: classifier)
            for vector in body.messages(100) { labels = (labels ?? []) + (try fields(of: vector)).strings(1) }
            for vector in body.messages(101) {
                labels = (labels ?? []) + (try fields(of: vector)).integers(1).map { String($0) }
            }
        }
        return Contents(classLabels: labels, metadata: metadata)
    }

    /// ONNX: ModelProto.metadata_props(14) entries; labels from the `class_labels` JSON array.
    public static func onnx(_ data: Data) throws -> Contents {
        let model = try fields(of: Array(data))
        var metadata: [String: String] = [:]
        for entry in model.messages(14) {
            let pair = try fields(of: entry)
            if let key = pair.strings(1).first { metadata[key] = pair.strings(2).first ?? "" }
        }
        var labels: [String]?
        if let json = metadata["class_labels"] {
            guard let decoded = try? JSONDecoder().decode([String].self, from: Data(json.utf8)) else {
                throw Failure(description: "its class_labels metadata is not a JSON array of strings")
            }
            labels = decoded
        }
        return Contents(classLabels: labels, metadata: metadata)
    }

    /// The fields of one protobuf message, by number, in file order.
    struct Fields {
        var entries: [(number: UInt64, value: Value)] = []
        enum Value {
            case integer(UInt64)
            case bytes([UInt8])
            case fixed
        }

        func messages(_ number: UInt64) -> [[UInt8]] {
            entries.compactMap { entry in
                guard entry.number == number, case .bytes(let bytes) = entry.value else { return nil }
                return bytes
            }
        }

        func strings(_ number: UInt64) -> [String] {
            messages(number).map { String(decoding: $0, as: UTF8.self) }
        }

        /// Varint fields, packed or not.
        func integers(_ number: UInt64) -> [Int64] {
            var result: [Int64] = []
            for entry in entries where entry.number == number {
                switch entry.value {
                case .integer(let value):
                    result.append(Int64(bitPattern: value))
                case .bytes(let bytes):
                    var offset = 0
                    while offset < bytes.count, let value = try? ExportInspector.varint(bytes, &offset) {
                        result.append(Int64(bitPattern: value))
                    }
                case .fixed:
                    break
                }
            }
            return result
        }
    }

    static func fields(of bytes: [UInt8]) throws -> Fields {
        var result = Fields()
        var offset = 0
        while offset < bytes.count {
            let key = try varint(bytes, &offset)
            let number = key >> 3
            guard number > 0 else { throw Failure(description: "not a protobuf message (field number 0)") }
            switch key & 7 {
            case 0:
                result.entries.append((number, .integer(try varint(bytes, &offset))))
            case 1, 5:
                let width = key & 7 == 1 ? 8 : 4
                guard offset + width <= bytes.count else { throw Failure(description: "truncated protobuf field") }
                offset += width
                result.entries.append((number, .fixed))
            case 2:
                let length = try varint(bytes, &offset)
                guard length <= UInt64(bytes.count - offset) else {
                    throw Failure(description: "truncated protobuf field \(number)")
                }
                let end = offset + Int(length)
                result.entries.append((number, .bytes(Array(bytes[offset..<end]))))
                offset = end
            default:
                throw Failure(description: "not a protobuf message (wire type \(key & 7))")
            }
        }
        return result
    }

    static func varint(_ bytes: [UInt8], _ offset: inout Int) throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count, shift < 64 {
            let byte = bytes[offset]
            offset += 1
            value |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        throw Failure(description: "truncated or overlong protobuf varint")
    }
}
