/// SplitMix64 (Steele, Lea, Flood 2014): a small deterministic generator,
/// so a failing randomized test can be replayed from its seed.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Different seeds start far apart (the seed is spread first).
    public init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1 }

    /// Starts at exactly `state` (the raw stream, for callers that record it).
    public init(state: UInt64) { self.state = state }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return Self.mix(state)
    }

    /// A number in `0..<n`.
    public mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

    /// The output function alone: the `index`th value of the stream for
    /// `seed`, computable without the ones before it.
    public static func value(seed: UInt64, index: UInt64) -> UInt64 {
        mix(seed &+ (index &* 0x9E37_79B9_7F4A_7C15))
    }

    private static func mix(_ x: UInt64) -> UInt64 {
        var z = x
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
