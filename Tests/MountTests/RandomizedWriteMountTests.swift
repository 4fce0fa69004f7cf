import Foundation
import TestServerClient
import Testing
#if canImport(Glibc)
import Glibc
import TestSupport
#endif

extension MountTests {
    /// Seeded sequences of open/create, writes at random offsets, truncate,
    /// rename, unlink, fsync, close and reads, run by system calls against
    /// the mount and against a plain local directory side by side: every
    /// call must answer the same on both, and at the end both trees (through
    /// the mount, and through the server's API after unmounting) must match
    /// byte for byte. Issue 4.
    @Suite struct RandomizedWrites {
        static let seeds: [UInt64] = [0x5EED_0001, 0xB0C4_E7F5, 424_242]
        static let operationCount = 150
        /// Eight names in two directories: small enough that renames and
        /// unlinks keep hitting names that are open or were just written.
        static let names = ["d0/a", "d0/b", "d0/c", "d0/d", "d1/a", "d1/b", "d1/c", "d1/d"]
        static let maxOffset = 3 << 20

        /// The same sequence for a seed on every machine.
        struct Generator {
            var random: SplitMix64
            mutating func next() -> UInt64 { random.next() }
            mutating func below(_ n: Int) -> Int { random.below(n) }
            mutating func name() -> String { RandomizedWrites.names[below(RandomizedWrites.names.count)] }
        }

        enum Offset: CustomStringConvertible {
            case at(Int)
            /// At the current end of the file (as seen by fstat on the local side).
            case append
            /// At this many thousandths of the current size (local side), so
            /// that most reads land on bytes rather than past the end.
            case inside(permille: Int)
            var description: String {
                switch self {
                case .at(let n): "\(n)"
                case .append: "end"
                case .inside(let p): "\(p)‰ of the size"
                }
            }
        }

        enum Operation: CustomStringConvertible {
            case open(String, truncate: Bool)
            case write(String, Offset, length: Int, dataSeed: UInt64)
            case truncate(String, size: Int)
            case read(String, Offset, length: Int)
            case fsync(String)
            case close(String)
            case stat(String)
            case rename(String, String)
            case unlink(String)

            var description: String {
                switch self {
                case .open(let n, let t): "open(\(n), O_RDWR|O_CREAT\(t ? "|O_TRUNC" : ""))"
                case .write(let n, let o, let l, _): "pwrite(\(n), \(l) bytes at \(o))"
                case .truncate(let n, let s): "ftruncate(\(n), \(s))"
                case .read(let n, let o, let l): "pread(\(n), \(l) bytes at \(o))"
                case .fsync(let n): "fsync(\(n))"
                case .close(let n): "close(\(n))"
                case .stat(let n): "lstat(\(n))"
                case .rename(let a, let b): "rename(\(a), \(b))"
                case .unlink(let n): "unlink(\(n))"
                }
            }
        }

        static func operations(seed: UInt64) -> [Operation] {
            var g = Generator(random: SplitMix64(state: seed))
            return (0..<operationCount).map { _ in
                let roll = g.below(100)
                switch roll {
                case 0..<35:
                    let length = g.below(10) < 7 ? 1 + g.below(16 << 10) : (16 << 10) + g.below(496 << 10)
                    let offset: Offset = switch g.below(10) {
                    case 0..<4: .append
                    case 4..<8: .at(g.below(maxOffset))
                    default: .at(g.below(64 << 10))
                    }
                    return .write(g.name(), offset, length: length, dataSeed: g.next())
                case 35..<50:
                    let offset: Offset = g.below(5) == 0 ? .at(g.below(maxOffset + (512 << 10))) : .inside(permille: g.below(1000))
                    return .read(g.name(), offset, length: 1 + g.below(256 << 10))
                case 50..<56: return .open(g.name(), truncate: g.below(3) == 0)
                case 56..<64: return .truncate(g.name(), size: g.below(2) == 0 ? g.below(maxOffset) : g.below(128 << 10))
                case 64..<69: return .fsync(g.name())
                case 69..<79: return .close(g.name())
                case 79..<85: return .stat(g.name())
                case 85..<93: return .rename(g.name(), g.name())
                default: return .unlink(g.name())
                }
            }
        }

        /// What one call answered, compared between the two sides.
        enum Observed: Equatable, CustomStringConvertible {
            case ok
            case size(Int)
            case bytes(Data)
            case failed(String, Int32)
            case notOpen

            var description: String {
                switch self {
                case .ok: "ok"
                case .size(let n): "size \(n)"
                case .bytes(let d): "\(d.count) bytes"
                case .failed(let call, let code): "\(call) failed: \(Posix.name(code))"
                case .notOpen: "not open"
                }
            }
        }

        /// One tree (the mount or the local directory) and its open handles.
        /// Handles are closed before a rename or unlink touches their name,
        /// so each handle always belongs to the name it was opened under.
        final class Side {
            let root: String
            var handles: [String: Int32] = [:]
            init(root: String) { self.root = root }

            func path(_ name: String) -> String { root + "/" + name }

            func closeHandle(_ name: String) -> Observed? {
                guard let fd = handles.removeValue(forKey: name) else { return nil }
                return Glibc.close(fd) == 0 ? nil : .failed("close", errno)
            }

            func handle(_ name: String, truncate: Bool = false) -> Result<Int32, PosixFailureObserved> {
                if let fd = handles[name] { return .success(fd) }
                let fd = Glibc.open(path(name), O_RDWR | O_CREAT | (truncate ? O_TRUNC : 0), 0o644)
                guard fd >= 0 else { return .failure(PosixFailureObserved(observed: .failed("open", errno))) }
                handles[name] = fd
                return .success(fd)
            }

            func perform(_ operation: Operation, resolvedOffset: Int) -> Observed {
                switch operation {
                case .open(let name, let truncate):
                    if let failed = closeHandle(name) { return failed }
                    switch handle(name, truncate: truncate) {
                    case .success: return .ok
                    case .failure(let f): return f.observed
                    }
                case .write(let name, _, let length, let dataSeed):
                    switch handle(name) {
                    case .failure(let f): return f.observed
                    case .success(let fd):
                        let data = MountEnv.pattern(length, seed: dataSeed)
                        return Posix.pwriteAll(fd, data, at: resolvedOffset).map { .failed("pwrite", $0) } ?? .ok
                    }
                case .truncate(let name, let size):
                    switch handle(name) {
                    case .failure(let f): return f.observed
                    case .success(let fd): return ftruncate(fd, off_t(size)) == 0 ? .ok : .failed("ftruncate", errno)
                    }
                case .read(let name, _, let length):
                    switch handle(name) {
                    case .failure(let f): return f.observed
                    case .success(let fd):
                        switch Posix.pread(fd, count: length, at: resolvedOffset) {
                        case .success(let data): return .bytes(data)
                        case .failure(let f): return .failed("pread", f.code)
                        }
                    }
                case .fsync(let name):
                    guard let fd = handles[name] else { return .notOpen }
                    return Glibc.fsync(fd) == 0 ? .ok : .failed("fsync", errno)
                case .close(let name):
                    guard handles[name] != nil else { return .notOpen }
                    return closeHandle(name) ?? .ok
                case .stat(let name):
                    var st = Glibc.stat()
                    return lstat(path(name), &st) == 0 ? .size(Int(st.st_size)) : .failed("lstat", errno)
                case .rename(let from, let to):
                    if let failed = closeHandle(from) ?? closeHandle(to) { return failed }
                    return Glibc.rename(path(from), path(to)) == 0 ? .ok : .failed("rename", errno)
                case .unlink(let name):
                    if let failed = closeHandle(name) { return failed }
                    return Glibc.unlink(path(name)) == 0 ? .ok : .failed("unlink", errno)
                }
            }

            /// The offset a write or read goes to, from this side's size of
            /// the file for `.append` and `.inside` (opening it as the call
            /// would).
            func resolve(_ operation: Operation) -> Int {
                let (name, offset): (String, Offset)
                switch operation {
                case .write(let n, let o, _, _): (name, offset) = (n, o)
                case .read(let n, let o, _): (name, offset) = (n, o)
                default: return 0
                }
                if case .at(let n) = offset { return n }
                guard case .success(let fd) = handle(name) else { return 0 }
                var st = Glibc.stat()
                guard fstat(fd, &st) == 0 else { return 0 }
                if case .inside(let permille) = offset { return Int(st.st_size) * permille / 1000 }
                return Int(st.st_size)
            }

            /// Closes every handle; the failures, by name.
            func closeAll() -> [String: Observed] {
                var failures: [String: Observed] = [:]
                for name in handles.keys.sorted() {
                    if let failed = closeHandle(name) { failures[name] = failed }
                }
                return failures
            }
        }

        struct PosixFailureObserved: Error { let observed: Observed }

        /// First differing byte of two buffers, for messages.
        static func firstDifference(_ a: Data, _ b: Data) -> String {
            let index = zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(a.count, b.count)
            return "first difference at byte \(index) (\(a.count) vs \(b.count) bytes)"
        }

        @Test("seeded random operations: the mount answers like a local directory, and holds the same tree",
              .timeLimit(.minutes(10)), arguments: seeds)
        func sameAsLocalDirectory(seed: UInt64) async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("random")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let local = Side(root: scratch)
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }
            let remote = Side(root: mount.path)
            defer {
                _ = remote.closeAll()
                _ = local.closeAll()
            }
            let label = "seed \(seed) (0x\(String(seed, radix: 16)))"
            print("randomized writes: \(label), prefix \(prefix)")

            for dir in ["d0", "d1"] {
                #expect(mkdir(local.path(dir), 0o755) == 0)
                let made = mkdir(remote.path(dir), 0o755)
                try #require(made == 0, "\(label): mkdir \(dir) on the mount: \(Posix.name(errno))\nlog:\n\(mount.logTail())")
            }

            var history: [String] = []
            for (index, operation) in Self.operations(seed: seed).enumerated() {
                let offset = local.resolve(operation)
                let expected = local.perform(operation, resolvedOffset: offset)
                let actual = remote.perform(operation, resolvedOffset: offset)
                history.append("#\(index) \(operation)\(offset > 0 ? " [offset \(offset)]" : ""): \(expected)")
                if actual != expected {
                    var detail = "mount: \(actual), local: \(expected)"
                    if case .bytes(let a) = actual, case .bytes(let e) = expected { detail += "; " + Self.firstDifference(a, e) }
                    Issue.record("""
                        \(label): operation #\(index) \(operation) differs: \(detail)
                        last operations:
                        \(history.suffix(12).joined(separator: "\n"))
                        log:
                        \(mount.logTail())
                        """)
                    return
                }
            }
            let localClose = local.closeAll()
            let remoteClose = remote.closeAll()
            #expect(remoteClose == localClose, "\(label): closing the last handles: mount \(remoteClose), local \(localClose)")

            let expectedTree = try LocalTree.read(scratch)
            let throughMount = try LocalTree.read(mount.path)
            let mountDiff = ObjectChecks.differences(throughMount, expectedTree)
            #expect(mountDiff.isEmpty, "\(label): the tree through the mount differs: \(mountDiff.joined(separator: "; "))\nlog:\n\(mount.logTail())")

            mount.cleanup()
            let stored = try await gcs.tree(under: prefix)
            let storedDiff = ObjectChecks.differences(stored, expectedTree)
            #expect(storedDiff.isEmpty, "\(label): the bucket differs from the local tree: \(storedDiff.joined(separator: "; "))")
        }
    }
}
