import Foundation

/// Lowercase hex SHA-256 of some bytes: names crops by content for the split, duplicate detection
/// and the data fingerprint.
package func contentHash(_ data: Data) -> String { SHA256.hash(data) }
