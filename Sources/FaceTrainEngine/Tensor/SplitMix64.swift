import Foundation

/// The one seeded random number generator of facetrain: initialisation, dropout, shuffling, splits.
///
/// SplitMix64 (Steele, Lea & Flood 2014; constants from Vigna's reference implementation): a 64-bit
/// state advanced by a fixed increment and mixed. Its whole state is `state`, so checkpoints save
/// and restore it exactly.
public struct SplitMix64: RandomNumberGenerator, Sendable, Equatable, Codable {
    /// The complete generator state.
    public var state: UInt64

    /// A generator that starts from `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform float in [0, 1) with 24 random bits.
    public mutating func nextUniform() -> Float { Float(next() >> 40) * 0x1p-24 }

    /// A standard normal float (Box–Muller in double precision; one value per call).
    public mutating func nextNormal() -> Float {
        let u1 = (Double(next() >> 11) + 1) * 0x1p-53  // (0, 1]: log stays finite
        let u2 = Double(next() >> 11) * 0x1p-53
        return Float((-2 * _log(u1)).squareRoot() * _cos(2 * Double.pi * u2))
    }

    /// An independent generator seeded from this one's next output.
    public mutating func split() -> SplitMix64 { SplitMix64(seed: next()) }
}

@inline(__always) private func _log(_ x: Double) -> Double { Foundation.log(x) }
@inline(__always) private func _cos(_ x: Double) -> Double { Foundation.cos(x) }
