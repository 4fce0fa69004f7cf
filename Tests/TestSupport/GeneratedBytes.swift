import Foundation

/// Test data made in a plain loop, as fast in a debug build as it can be
/// without unsafe pointers. `(0..<n).map { ... }` costs about 200 ns a byte
/// there (1.6 s for 8 MiB) and `UInt8.random(in:using:)` about 800 ns,
/// which made byte generators the largest use of CPU in the test process
/// and held Swift's cooperative threads from every other test (see
/// `OwnThread`); a loop into a preallocated array is about 14 times faster.
public enum GeneratedBytes {
    /// `count` bytes, byte `i` being `byte(i)`.
    public static func array(_ count: Int, _ byte: (Int) -> UInt8) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        for i in 0..<count { bytes[i] = byte(i) }
        return bytes
    }

    /// `count` bytes, byte `i` being `byte(i)`.
    public static func data(_ count: Int, _ byte: (Int) -> UInt8) -> Data { Data(array(count, byte)) }

    /// `count` random bytes from `generator`, eight from each of its words.
    public static func random<G: RandomNumberGenerator>(_ count: Int, using generator: inout G) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var word: UInt64 = 0
        for i in 0..<count {
            if i % 8 == 0 { word = generator.next() }
            bytes[i] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(i % 8)))
        }
        return bytes
    }
}
