import Foundation

/// Test data made in plain loops, for speed in a debug build:
/// `(0..<n).map { ... }` costs about 200 ns a byte there (1.6 s for 8 MiB)
/// and `UInt8.random(in:using:)` about 800 ns, which made byte generators
/// the largest use of CPU in the test process and held Swift's cooperative
/// threads from every other test (see `OwnThread`). A loop into a
/// preallocated array is about 14 times faster, a word at a time faster
/// still.
public enum GeneratedBytes {
    /// `count` bytes, byte `i` being `byte(i)`.
    public static func array(_ count: Int, _ byte: (Int) -> UInt8) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        for i in 0..<count { bytes[i] = byte(i) }
        return bytes
    }

    /// `count` bytes, byte `i` being `byte(i)`.
    public static func data(_ count: Int, _ byte: (Int) -> UInt8) -> Data { Data(array(count, byte)) }

    /// `count` random bytes from `generator`, eight from each of its words
    /// (a word at a time: some tests make files of 20 to 100 MiB).
    public static func random<G: RandomNumberGenerator>(_ count: Int, using generator: inout G) -> Data {
        var words = [UInt64](repeating: 0, count: (count + 7) / 8)
        for i in words.indices { words[i] = generator.next() }
        // The words' own bytes; the last word's beyond `count` are cut.
        var data = words.withUnsafeBytes { Data($0) }
        data.removeLast(data.count - count)
        return data
    }
}
