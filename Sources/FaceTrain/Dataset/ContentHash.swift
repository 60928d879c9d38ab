import CCrypto
import Foundation

/// Lowercase hex SHA-256 of some bytes: names crops by content for the split, duplicate detection
/// and the data fingerprint.
func contentHash(_ data: Data) -> String {
    var digest = [UInt8](repeating: 0, count: 32)
    data.withUnsafeBytes { bytes in
        _ = CCrypto.SHA256(bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count, &digest)
    }
    return digest.map { String(format: "%02x", $0) }.joined()
}
