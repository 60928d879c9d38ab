import Foundation
import Testing

@testable import FaceTrain
@testable import FaceTrainEngine

@Suite struct KernelTests {
    /// col2im is the adjoint of im2col: ⟨im2col(x), y⟩ = ⟨x, col2im(y)⟩ for random x and y.
    @Test(arguments: [
        ConvolutionGeometry(channels: 2, height: 5, width: 4, kernelSize: 3, stride: 1, padding: 1),
        ConvolutionGeometry(channels: 3, height: 7, width: 6, kernelSize: 3, stride: 2, padding: 1),
        ConvolutionGeometry(channels: 1, height: 6, width: 6, kernelSize: 2, stride: 2, padding: 0),
        ConvolutionGeometry(channels: 2, height: 4, width: 5, kernelSize: 5, stride: 1, padding: 2),
        ConvolutionGeometry(channels: 2, height: 3, width: 3, kernelSize: 1, stride: 1, padding: 0),
        ConvolutionGeometry(channels: 3, height: 6, width: 9, kernelSize: 3, stride: 1, padding: 1),
        ConvolutionGeometry(channels: 1, height: 3, width: 2, kernelSize: 3, stride: 1, padding: 1),
        // A plane smaller than the kernel: taps shift past all of it.
        ConvolutionGeometry(channels: 2, height: 1, width: 1, kernelSize: 3, stride: 1, padding: 1),
        ConvolutionGeometry(channels: 1, height: 1, width: 2, kernelSize: 5, stride: 1, padding: 2),
        ConvolutionGeometry(channels: 2, height: 4, width: 4, kernelSize: 3, stride: 1, padding: 0),
    ])
    func col2imIsTheAdjointOfIm2col(_ g: ConvolutionGeometry) {
        let x = TestData.normal([g.channels * g.inputPixels], seed: 1).scalars
        let y = TestData.normal([g.patchSize * g.outputPixels], seed: 2).scalars
        var columns = [Float](repeating: .nan, count: y.count)
        var image = [Float](repeating: .nan, count: x.count)
        x.withUnsafeBufferPointer {
            im2col($0.baseAddress!, g, columns.withUnsafeMutableBufferPointer { $0.baseAddress! })
        }
        var scratch = y  // col2im may zero the entries that read padding
        scratch.withUnsafeMutableBufferPointer {
            col2im($0.baseAddress!, g, image.withUnsafeMutableBufferPointer { $0.baseAddress! })
        }
        let left = zip(columns, y).reduce(0.0) { $0 + Double($1.0) * Double($1.1) }
        let right = zip(x, image).reduce(0.0) { $0 + Double($1.0) * Double($1.1) }
        #expect(abs(left - right) <= 1e-5 * max(1, abs(left)))
        #expect(!columns.contains { $0.isNaN } && !image.contains { $0.isNaN })
    }

    /// The same-padding fast path agrees with the general loop (reached through a stride-1 geometry
    /// that is not "same", whose columns are a sub-grid of the same-padded ones).
    @Test func samePaddingFastPathMatchesDirectIndexing() {
        let g = ConvolutionGeometry(channels: 2, height: 5, width: 7, kernelSize: 3, stride: 1, padding: 1)
        let x = TestData.normal([2 * 35], seed: 5).scalars
        var columns = [Float](repeating: .nan, count: g.patchSize * g.outputPixels)
        x.withUnsafeBufferPointer {
            im2col($0.baseAddress!, g, columns.withUnsafeMutableBufferPointer { $0.baseAddress! })
        }
        for c in 0..<2 {
            for ky in 0..<3 {
                for kx in 0..<3 {
                    for oy in 0..<5 {
                        for ox in 0..<7 {
                            let (y, xx) = (oy + ky - 1, ox + kx - 1)
                            let expected = (0..<5).contains(y) && (0..<7).contains(xx) ? x[c * 35 + y * 7 + xx] : 0
                            #expect(columns[((c * 3 + ky) * 3 + kx) * 35 + oy * 7 + ox] == expected)
                        }
                    }
                }
            }
        }
    }

    /// im2col by hand: a 1-channel 2×2 image, 2×2 kernel, padding 1 → 3×3 outputs per kernel tap.
    @Test func im2colByHand() {
        let g = ConvolutionGeometry(channels: 1, height: 2, width: 2, kernelSize: 2, stride: 1, padding: 1)
        var columns = [Float](repeating: .nan, count: 4 * 9)
        [Float]([1, 2, 3, 4]).withUnsafeBufferPointer {
            im2col($0.baseAddress!, g, columns.withUnsafeMutableBufferPointer { $0.baseAddress! })
        }
        // Tap (0,0) reads x[oy - 1, ox - 1]; tap (1,1) reads x[oy, ox].
        #expect(Array(columns[0..<9]) == [0, 0, 0, 0, 1, 2, 0, 3, 4])
        #expect(Array(columns[27..<36]) == [1, 2, 0, 3, 4, 0, 0, 0, 0])
    }

    /// The gemm wrapper against a naive product, in every transpose combination.
    @Test(arguments: [(false, false), (true, false), (false, true), (true, true)])
    func gemmMatchesNaiveProduct(_ transposes: (Bool, Bool)) {
        let (m, n, k) = (5, 7, 3)
        let a = TestData.normal([m * k], seed: 3).scalars
        let b = TestData.normal([k * n], seed: 4).scalars
        var c = [Float](repeating: 1, count: m * n)
        a.withUnsafeBufferPointer { a in
            b.withUnsafeBufferPointer { b in
                c.withUnsafeMutableBufferPointer {
                    gemm(
                        transposeA: transposes.0, transposeB: transposes.1, m: m, n: n, k: k, alpha: 2,
                        a: a.baseAddress!, b: b.baseAddress!, beta: 0.5, c: $0.baseAddress!)
                }
            }
        }
        for i in 0..<m {
            for j in 0..<n {
                var expected: Float = 0.5
                for p in 0..<k {
                    let left = transposes.0 ? a[p * m + i] : a[i * k + p]
                    let right = transposes.1 ? b[j * k + p] : b[p * n + j]
                    expected += 2 * left * right
                }
                #expect(abs(c[i * n + j] - expected) < 1e-5)
            }
        }
    }

    @Test func chunkRangesCoverEverythingInOrder() {
        for count in [1, 5, 8, 32, 33] {
            let ranges = Parallel.ranges(count, parts: 8)
            #expect(ranges.flatMap { Array($0) } == Array(0..<count))
            #expect(ranges.allSatisfy { !$0.isEmpty })
        }
    }

    /// Parallel.map hands back its results in order and keeps none of them: every result object is
    /// released once the caller drops the array (the detector's training leaked its loss's per-image
    /// results, about 200 MB an epoch, before map deinitialised its buffer).
    @Test func parallelMapReleasesItsResults() {
        final class Counted: @unchecked Sendable {
            static let lock = NSLock()
            nonisolated(unsafe) static var alive = 0
            let index: Int
            init(_ index: Int) {
                self.index = index
                Self.lock.withLock { Self.alive += 1 }
            }
            deinit { Self.lock.withLock { Self.alive -= 1 } }
        }
        do {
            let results = Parallel.map(64) { Counted($0) }
            withExtendedLifetime(results) {
                #expect(results.map(\.index) == Array(0..<64))
                #expect(Counted.lock.withLock { Counted.alive } == 64)
            }
        }
        #expect(Counted.lock.withLock { Counted.alive } == 0)
    }
}
