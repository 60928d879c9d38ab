/// Vectorised sums and adds. Swift does not reassociate floating-point adds, so a plain loop runs one add
/// per 4 cycles; these keep 16 independent lanes instead.

/// Σ x[i] over `count` floats.
@inline(__always)
func sum(_ x: UnsafePointer<Float>, count: Int) -> Float {
    var a = SIMD8<Float>()
    var b = SIMD8<Float>()
    var index = 0
    let raw = UnsafeRawPointer(x)
    while index + 16 <= count {
        a += raw.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self)
        b += raw.loadUnaligned(fromByteOffset: index * 4 + 32, as: SIMD8<Float>.self)
        index += 16
    }
    var total = (a + b).sum()
    while index < count {
        total += x[index]
        index += 1
    }
    return total
}

/// Σ (x[i] - center)² over `count` floats.
@inline(__always)
func sumOfSquaredDeviations(_ x: UnsafePointer<Float>, count: Int, center: Float) -> Float {
    var a = SIMD8<Float>()
    var b = SIMD8<Float>()
    let c = SIMD8<Float>(repeating: center)
    var index = 0
    let raw = UnsafeRawPointer(x)
    while index + 16 <= count {
        let u = raw.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self) - c
        let v = raw.loadUnaligned(fromByteOffset: index * 4 + 32, as: SIMD8<Float>.self) - c
        a += u * u
        b += v * v
        index += 16
    }
    var total = (a + b).sum()
    while index < count {
        let d = x[index] - center
        total += d * d
        index += 1
    }
    return total
}

/// Σ x[i]·y[i] over `count` floats.
@inline(__always)
package func dot(_ x: UnsafePointer<Float>, _ y: UnsafePointer<Float>, count: Int) -> Float {
    var a = SIMD8<Float>()
    var b = SIMD8<Float>()
    var index = 0
    let rx = UnsafeRawPointer(x)
    let ry = UnsafeRawPointer(y)
    while index + 16 <= count {
        a +=
            rx.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self)
            * ry.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self)
        b +=
            rx.loadUnaligned(fromByteOffset: index * 4 + 32, as: SIMD8<Float>.self)
            * ry.loadUnaligned(fromByteOffset: index * 4 + 32, as: SIMD8<Float>.self)
        index += 16
    }
    var total = (a + b).sum()
    while index < count {
        total += x[index] * y[index]
        index += 1
    }
    return total
}

/// y[i] += x[i] over `count` floats (residual adds, gradients from several consumers).
@inline(__always)
func addInPlace(_ y: UnsafeMutablePointer<Float>, _ x: UnsafePointer<Float>, count: Int) {
    add(UnsafePointer(y), x, into: y, count: count)
}

/// `y = a + b`, element by element (`y` may be `a` or `b`).
@inline(__always)
func add(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, into y: UnsafeMutablePointer<Float>, count: Int) {
    var index = 0
    let (first, second, target) = (UnsafeRawPointer(a), UnsafeRawPointer(b), UnsafeMutableRawPointer(y))
    while index + 8 <= count {
        let sum =
            first.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self)
            + second.loadUnaligned(fromByteOffset: index * 4, as: SIMD8<Float>.self)
        target.storeBytes(of: sum, toByteOffset: index * 4, as: SIMD8<Float>.self)
        index += 8
    }
    while index < count {
        y[index] = a[index] + b[index]
        index += 1
    }
}
