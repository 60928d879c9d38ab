import CLAPACKE

/// Projects row vectors onto their leading principal components.
///
/// The covariance matrix (d x d, d = 128 for face embeddings) is small, so its eigenvectors come
/// from LAPACK's symmetric eigensolver (`ssyevd`) rather than an SVD of the data.
public enum PrincipalComponents {
    /// `rows` vectors of `dimension` floats, row-major; returns `rows` x `components` coordinates
    /// and the share of variance each component explains. Nil when LAPACK fails.
    public static func project(_ data: [Float], rows: Int, dimension: Int, components: Int = 2) -> (
        coordinates: [Float], explained: [Float]
    )? {
        guard rows > 0, dimension > 0, data.count == rows * dimension, components <= dimension else { return nil }
        var mean = [Double](repeating: 0, count: dimension)
        for row in 0..<rows { for column in 0..<dimension { mean[column] += Double(data[row * dimension + column]) } }
        mean = mean.map { $0 / Double(rows) }
        var covariance = [Double](repeating: 0, count: dimension * dimension)
        var centred = [Double](repeating: 0, count: dimension)
        for row in 0..<rows {
            for column in 0..<dimension { centred[column] = Double(data[row * dimension + column]) - mean[column] }
            for i in 0..<dimension where centred[i] != 0 {
                for j in i..<dimension { covariance[i * dimension + j] += centred[i] * centred[j] }
            }
        }
        var matrix = [Float](repeating: 0, count: dimension * dimension)
        for i in 0..<dimension {
            for j in i..<dimension {
                let value = Float(covariance[i * dimension + j] / Double(max(rows - 1, 1)))
                matrix[i * dimension + j] = value
                matrix[j * dimension + i] = value
            }
        }
        var eigenvalues = [Float](repeating: 0, count: dimension)
        // Row-major, upper triangle; on return the columns of `matrix` are eigenvectors, ascending.
        let status = LAPACKE_ssyevd(
            LAPACK_ROW_MAJOR, Int8(UInt8(ascii: "V")), Int8(UInt8(ascii: "U")), Int32(dimension), &matrix,
            Int32(dimension), &eigenvalues)
        guard status == 0 else { return nil }
        let total = eigenvalues.reduce(0) { $0 + max($1, 0) }
        var coordinates = [Float](repeating: 0, count: rows * components)
        var explained: [Float] = []
        for component in 0..<components {
            let column = dimension - 1 - component
            explained.append(total > 0 ? max(eigenvalues[column], 0) / total : 0)
            for row in 0..<rows {
                var sum: Double = 0
                for i in 0..<dimension {
                    sum += (Double(data[row * dimension + i]) - mean[i]) * Double(matrix[i * dimension + column])
                }
                coordinates[row * components + component] = Float(sum)
            }
        }
        return (coordinates, explained)
    }
}
