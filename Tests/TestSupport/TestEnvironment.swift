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

/// A test's own failure (a server's unexpected answer, a tool that did not
/// run, a state never reached), with what was seen.
public struct HarnessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
