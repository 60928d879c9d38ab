import Foundation

/// The seeded generator behind `facetrain synth`: SplitMix64 (Steele, Lea and Flood, 2014), kept private to
/// synthesis so the generated data never changes when the training engine's generator does.
///
/// Every identity and every image gets its own stream derived from (seed, stream, index…), so images can be
/// rendered in any order, on any number of threads, and still come out the same.
struct SynthesisRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose sequence depends only on `seed`.
    init(seed: UInt64) {
        state = seed
    }

    /// A generator for one stream and index path, e.g. (seed, user-images stream, user 4, image 17).
    init(seed: UInt64, stream: UInt64, indices: Int...) {
        var mixed = Self.mix(seed ^ 0x5EED_FACE_0000_0000)
        mixed = Self.mix(mixed ^ Self.mix(stream &+ 0x9E37_79B9_7F4A_7C15))
        for index in indices {
            mixed = Self.mix(mixed ^ Self.mix(UInt64(bitPattern: Int64(index)) &+ 0xD1B5_4A32_D192_ED03))
        }
        state = mixed
    }

    /// The next 64 random bits.
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return Self.mix(state)
    }

    /// SplitMix64's output function: a bijective 64-bit mixer.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform float in [0, 1) built from the top 24 bits, so it is exact and platform-independent.
    mutating func unit() -> Float {
        Float(next() >> 40) * (1 / 16_777_216)
    }

    /// A uniform float in `range`.
    mutating func uniform(_ range: ClosedRange<Float>) -> Float {
        range.lowerBound + (range.upperBound - range.lowerBound) * unit()
    }

    /// A uniform float in [-magnitude, magnitude].
    mutating func symmetric(_ magnitude: Float) -> Float {
        uniform(-magnitude...magnitude)
    }

    /// A uniform integer in `range`, without modulo bias.
    mutating func integer(_ range: ClosedRange<Int>) -> Int {
        // Multiply-high (Lemire) mapping; the bias is below 2^-32 for the small ranges used here.
        let span = UInt64(range.upperBound - range.lowerBound) + 1
        return range.lowerBound + Int(span.multipliedFullWidth(by: next()).high)
    }

    /// True with probability `probability`.
    mutating func chance(_ probability: Float) -> Bool {
        unit() < probability
    }

    /// A standard normal sample (Box–Muller).
    mutating func normal() -> Float {
        let u1 = max(unit(), 1e-7)
        let u2 = unit()
        return (-2 * logf(u1)).squareRoot() * cosf(2 * Float.pi * u2)
    }

    /// A uniformly chosen element of a non-empty array.
    mutating func element<T>(of array: [T]) -> T {
        array[integer(0...(array.count - 1))]
    }
}
