/// Growable storage for scratch space and saved activations, copied on write like `Array`.
///
/// Kernels work on raw pointers; this hands them out without the nested `withUnsafe…` closures
/// arrays need, while a copy of the owning struct (say `best = network`) still never shares a
/// buffer that either side writes.
struct Buffer<Element: BitwiseCopyable>: Sendable {
    private final class Storage: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<Element>
        let capacity: Int
        init(capacity: Int) {
            self.capacity = capacity
            pointer = .allocate(capacity: max(capacity, 1))
        }
        deinit { pointer.deallocate() }
    }

    private var storage: Storage
    /// Number of valid elements.
    private(set) var count: Int

    init(count: Int = 0) {
        storage = Storage(capacity: count)
        self.count = count
    }

    /// Sets the element count; contents survive only while the capacity suffices.
    mutating func resize(_ newCount: Int) {
        if newCount > storage.capacity { storage = Storage(capacity: newCount) }
        count = newCount
    }

    /// Read access; valid while this buffer is neither resized nor written.
    var pointer: UnsafePointer<Element> { UnsafePointer(storage.pointer) }

    /// Write access, copying first when another value shares the storage.
    mutating func mutablePointer() -> UnsafeMutablePointer<Element> {
        if !isKnownUniquelyReferenced(&storage) {
            let copy = Storage(capacity: storage.capacity)
            copy.pointer.update(from: storage.pointer, count: count)
            storage = copy
        }
        return storage.pointer
    }

    /// Sets every element to `value`.
    mutating func fill(_ value: Element) {
        mutablePointer().update(repeating: value, count: count)
    }
}

extension Buffer where Element == Float {
    /// The contents as an array.
    var array: [Float] { Array(UnsafeBufferPointer(start: pointer, count: count)) }

    /// Replaces the contents with `scalars`.
    mutating func assign(_ scalars: [Float]) {
        resize(scalars.count)
        let destination = mutablePointer()
        scalars.withUnsafeBufferPointer { destination.update(from: $0.baseAddress!, count: scalars.count) }
    }
}
