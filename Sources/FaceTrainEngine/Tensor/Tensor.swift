/// A dense float32 array with a shape, stored row-major; images are NCHW.
///
/// A value type: copies share storage until one of them writes (`Array`'s copy-on-write).
public struct Tensor: Sendable, Equatable {
    public var shape: [Int]
    public var scalars: [Float]

    /// A tensor of zeros with the given shape.
    public init(zeros shape: [Int]) {
        self.shape = shape
        self.scalars = [Float](repeating: 0, count: shape.reduce(1, *))
    }

    /// A tensor over existing scalars; their count must match the shape.
    public init(shape: [Int], scalars: [Float]) {
        precondition(shape.reduce(1, *) == scalars.count, "shape \(shape) does not hold \(scalars.count) scalars")
        self.shape = shape
        self.scalars = scalars
    }

    /// Number of scalars.
    public var count: Int { scalars.count }
}
