import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The environment `scripts/test.sh` exports (server URLs, the repository,
/// the Python it installed). A missing variable fails the test with
/// instructions; nothing is ever skipped.
public enum TestEnvironment {
    public struct NotConfigured: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// The non-empty value of `name`.
    public static func variable(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
            throw NotConfigured("\(name) is not set: run the tests with scripts/test.sh")
        }
        return value
    }

    /// A server's base URL from `name`, without a trailing slash.
    public static func endpoint(_ name: String) throws -> String {
        let value = try variable(name)
        return value.hasSuffix("/") ? String(value.dropLast()) : value
    }

    /// A server's base URL from `name`, parsed.
    public static func url(_ name: String) throws -> URL {
        let value = try variable(name)
        guard let url = URL(string: value) else { throw NotConfigured("\(name) is no URL: \(value)") }
        return url
    }
}

/// A port on loopback that nothing listens on (bound, then closed).
public func freePort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestEnvironment.NotConfigured("socket failed: errno \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard bound else { throw TestEnvironment.NotConfigured("no free port on 127.0.0.1: errno \(errno)") }
    return UInt16(bigEndian: address.sin_port)
}

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
