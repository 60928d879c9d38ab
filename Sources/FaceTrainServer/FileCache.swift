import Foundation

/// Values derived from files that never change in place — bundle files (a version's folder is
/// written once; withdrawn numbers are never reused) and crops (named by their SHA-256) — kept per
/// path while the file's size and modification time stay the same, so a download does not re-hash
/// a model and the admin page does not decode every thumbnail's crop again. Not for files
/// rewritten in place.
final class FileCache<Value>: @unchecked Sendable {
    private struct Entry {
        var size: Int
        var modified: Date
        var value: Value
    }
    private let lock = NSLock()
    private var entries: [String: Entry] = [:]
    private let capacity: Int

    init(capacity: Int = 1024) { self.capacity = capacity }

    /// The cached value for `url`, or `make`'s, kept when the file's size and time can be read.
    func value(for url: URL, make: () throws -> Value) rethrows -> Value {
        let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
        let size = attributes?[.size] as? Int
        let modified = attributes?[.modificationDate] as? Date
        if let size, let modified,
            let entry = lock.withLock({ entries[url.path] }), entry.size == size, entry.modified == modified
        {
            return entry.value
        }
        let value = try make()
        if let size, let modified {
            lock.withLock {
                // A full cache starts again: simpler than an order, and bounded.
                if entries.count >= capacity { entries = [:] }
                entries[url.path] = Entry(size: size, modified: modified, value: value)
            }
        }
        return value
    }
}
