import CCrypto
import Foundation

/// Streaming SHA-256 through OpenSSL libcrypto's EVP interface.
///
/// Feed bytes with `update`, read the digest once with `finalize`. One hasher per thread.
public final class SHA256Hasher {
    private let context: OpaquePointer?
    private var digest: [UInt8]?

    /// A hasher over no bytes yet.
    public init() {
        context = EVP_MD_CTX_new()
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds bytes to the message.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard digest == nil, let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    /// Adds bytes to the message.
    public func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }

    /// The 32-byte digest; later calls return the same digest.
    public func finalize() -> [UInt8] {
        if let digest { return digest }
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &output, &length)
        let result = Array(output.prefix(Int(length)))
        digest = result
        return result
    }

    /// The digest as 64 lowercase hex digits.
    public func finalizeHex() -> String { SHA256.hex(finalize()) }
}

/// SHA-256 of byte buffers and files, as lowercase hex (the form `sha256sum` prints).
public enum SHA256 {
    /// The hex SHA-256 of `data`.
    public static func hash(_ data: Data) -> String {
        let hasher = SHA256Hasher()
        hasher.update(data)
        return hasher.finalizeHex()
    }

    /// The hex SHA-256 and byte count of a file, read in 1 MiB pieces.
    public static func hashFile(at url: URL) throws -> (sha256: String, size: Int64) {
        let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileSystemError(operation: "open", path: url.path, code: errno) }
        defer { close(descriptor) }
        let hasher = SHA256Hasher()
        let chunkSize = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var size: Int64 = 0
        while true {
            let count = read(descriptor, buffer.baseAddress, chunkSize)
            if count < 0 {
                if errno == EINTR { continue }
                throw FileSystemError(operation: "read", path: url.path, code: errno)
            }
            if count == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            size += Int64(count)
        }
        return (hasher.finalizeHex(), size)
    }

    /// The hex HMAC-SHA256 of `message` under `key` (RFC 2104), as webhook signatures carry it.
    public static func hmac(key: Data, message: Data) -> String {
        var output = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        key.withUnsafeBytes { keyBytes in
            message.withUnsafeBytes { messageBytes in
                // HMAC takes a non-null pointer even for empty input.
                let empty: [UInt8] = [0]
                empty.withUnsafeBytes { fallback in
                    _ = HMAC(
                        EVP_sha256(), keyBytes.baseAddress ?? fallback.baseAddress, Int32(keyBytes.count),
                        (messageBytes.baseAddress ?? fallback.baseAddress)?.assumingMemoryBound(to: UInt8.self),
                        messageBytes.count, &output, &length)
                }
            }
        }
        return hex(Array(output.prefix(Int(length))))
    }

    /// Lowercase hex of bytes.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var characters: [UInt8] = []
        characters.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            characters.append(digits[Int(byte >> 4)])
            characters.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// Whether `text` looks like a SHA-256 in lowercase hex.
    public static func isHexDigest(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}
