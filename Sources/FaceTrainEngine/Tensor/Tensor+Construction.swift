/// Ways to make tensors that the engine needs: uninitialised fills for kernels, and random values.
extension Tensor {
    /// A tensor whose scalars `initializer` writes, without zero-filling them first.
    ///
    /// `initializer` must write every one of the `shape.reduce(1, *)` scalars.
    public init(shape: [Int], unsafeUninitialized initializer: (UnsafeMutablePointer<Float>) -> Void) {
        let count = shape.reduce(1, *)
        let scalars = [Float](unsafeUninitializedCapacity: count) { buffer, initializedCount in
            if let base = buffer.baseAddress { initializer(base) }
            initializedCount = count
        }
        self.init(shape: shape, scalars: scalars)
    }

    /// A tensor of normally distributed values with mean 0 and the given standard deviation.
    public init(randomNormal shape: [Int], standardDeviation: Float, using generator: inout SplitMix64) {
        let count = shape.reduce(1, *)
        var scalars = [Float](repeating: 0, count: count)
        for index in 0..<count { scalars[index] = generator.nextNormal() * standardDeviation }
        self.init(shape: shape, scalars: scalars)
    }

    /// A tensor with every scalar equal to `value`.
    public init(repeating value: Float, shape: [Int]) {
        self.init(shape: shape, scalars: [Float](repeating: value, count: shape.reduce(1, *)))
    }
}
