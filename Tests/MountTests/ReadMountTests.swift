import Foundation
import TestServerClient
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// Reading bytes with `cat`, `cp` and `dd`, compared with what was uploaded.
    @Suite struct Reading {
        /// `dd` of `count` bytes at `offset` (bs=4096, byte-exact skip/count).
        static func dd(_ path: String, offset: Int, count: Int) async throws -> ToolResult {
            try await Tools.run("/bin/dd", [
                "if=\(path)", "bs=4096", "iflag=skip_bytes,count_bytes", "skip=\(offset)", "count=\(count)", "status=none",
            ])
        }

        /// Offsets and lengths for `dd` over an object of `size` bytes:
        /// edges, block boundaries, unaligned spots, plus seeded random ones.
        static func ranges(size: Int, random: Int, seed: UInt64) -> [(Int, Int)] {
            var ranges: [(Int, Int)] = [(0, 1), (0, 4096), (1, 4095), (size - 1, 1), (size - 100, 4096)]
            for boundary in [1 << 20, 4 << 20, 8 << 20, 64 << 20] where boundary < size {
                ranges.append((boundary - 7, 4096 + 14))
                ranges.append((boundary, 10_000))
            }
            var state = seed
            for _ in 0..<random {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                let offset = Int((state >> 11) % UInt64(size))
                state = state &* 6364136223846793005 &+ 1442695040888963407
                let length = 1 + Int((state >> 11) % 300_000)
                ranges.append((offset, length))
            }
            return ranges.filter { $0.0 >= 0 && $0.0 < size }
        }

        static func checkRanges(_ mountPath: String, source: FileHandle, size: Int, ranges: [(Int, Int)]) async throws {
            for (offset, length) in ranges {
                try source.seek(toOffset: UInt64(offset))
                let expected = try source.read(upToCount: length) ?? Data()
                let result = try await dd(mountPath, offset: offset, count: length)
                #expect(result.ok, "\(result.summary)")
                #expect(result.stdout.count == min(length, size - offset), "dd at \(offset)+\(length) gave \(result.stdout.count) bytes")
                #expect(result.stdout == expected, "dd at \(offset)+\(length): bytes differ from the source")
            }
        }

        @Test("cat and cp of 0-byte, 1-byte and 5 MiB objects match by md5; dd reads at offsets")
        func smallAndMediumObjects() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("read")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let objects: [(String, Data)] = [
                ("zero", Data()), ("one", Data([0x5A])), ("five-mib.bin", MountEnv.pattern(5 << 20, seed: 55)),
            ]
            for (name, data) in objects {
                try data.write(to: URL(fileURLWithPath: "\(scratch)/\(name).src"))
                try await gcs.put("\(prefix)/\(name)", data)
            }

            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }

            for (name, data) in objects {
                let expected = try await Tools.md5("\(scratch)/\(name).src")

                let size = try await Tools.run("/usr/bin/stat", ["-c", "%s", mount.at(name)])
                #expect(size.out.trimmingCharacters(in: .whitespacesAndNewlines) == "\(data.count)", "stat \(name): \(size.summary) \(size.out)")

                let catOut = "\(scratch)/\(name).cat"
                let cat = try await Tools.run("/bin/cat", [mount.at(name)], stdoutPath: catOut)
                #expect(cat.ok, "\(cat.summary)")
                let catMD5 = try await Tools.md5(catOut)
                #expect(catMD5 == expected, "cat \(name): md5 \(catMD5), uploaded \(expected)")

                let cpOut = "\(scratch)/\(name).cp"
                let cp = try await Tools.run("/bin/cp", [mount.at(name), cpOut])
                #expect(cp.ok, "\(cp.summary)")
                let cpMD5 = try await Tools.md5(cpOut)
                #expect(cpMD5 == expected, "cp \(name): md5 \(cpMD5), uploaded \(expected)")

                let md5 = try await Tools.run("/usr/bin/md5sum", [mount.at(name)])
                #expect(md5.out.hasPrefix(expected), "md5sum inside the mount: \(md5.summary) \(md5.out)")
            }

            // dd at offsets of the 5 MiB object, in a fresh mount so the
            // bytes are not all cached yet.
            let fresh = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { fresh.cleanup() }
            let source = try FileHandle(forReadingFrom: URL(fileURLWithPath: "\(scratch)/five-mib.bin.src"))
            defer { try? source.close() }
            try await Self.checkRanges(
                fresh.at("five-mib.bin"), source: source, size: 5 << 20, ranges: Self.ranges(size: 5 << 20, random: 12, seed: 7))
            // Reading past the end gives nothing.
            let past = try await Self.dd(fresh.at("five-mib.bin"), offset: (5 << 20) + 10, count: 100)
            #expect(past.ok && past.stdout.isEmpty, "dd past the end: \(past.summary)")
            let one = try await Self.dd(fresh.at("one"), offset: 0, count: 4096)
            #expect(one.ok && one.stdout == Data([0x5A]), "dd of the 1-byte object: \(one.summary)")
        }

        /// The 300 MiB source file, made once per run with deterministic content.
        static let bigSize = 300 << 20
        static let bigFile: Result<String, HarnessError> = {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("bucketfs-mt-300MiB-\(getpid()).bin").path
            guard FileManager.default.createFile(atPath: path, contents: nil),
                let handle = FileHandle(forWritingAtPath: path)
            else { return .failure(HarnessError("cannot create \(path)")) }
            defer { try? handle.close() }
            let chunk = 8 << 20
            var buffer = Data(count: chunk)
            var offset = 0
            do {
                while offset < bigSize {
                    let n = min(chunk, bigSize - offset)
                    if n != buffer.count { buffer = Data(count: n) }
                    MountEnv.fillPattern(&buffer, seed: 300, offset: offset)
                    try handle.write(contentsOf: buffer)
                    offset += n
                }
            } catch {
                return .failure(HarnessError("writing \(path): \(error)"))
            }
            return .success(path)
        }()

        @Test("a sequential cat of 64 MiB is one stream of a handful of growing GETs, and its bytes match")
        func sequentialReadIsAStream() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("stream")
            let size = 64 << 20
            let data = MountEnv.pattern(size, seed: 64)
            try await gcs.put("\(prefix)/big.bin", data)
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }

            let log = try RequestLog.mark()
            let out = "\(scratch)/big.copy"
            let cat = try await Tools.run("/bin/cat", [mount.at("big.bin")], stdoutPath: out)
            #expect(cat.ok, "\(cat.summary)\nlog:\n\(mount.logTail())")
            let media = try log.entries().filter { $0.method == "GET" && $0.parameter("alt") == "media" && $0.objectName == "\(prefix)/big.bin" }
            // Windows of 1 MiB doubling up to the link's four round trips,
            // at least two kernel windows (32 MiB on loopback, refilled
            // 16-17 MiB at a time): 8 GETs, plus the odd direct read of a
            // block whose buffer was already dropped. The
            // kernel's requests arrive out of order (by up to its 16 MiB
            // read-ahead) and the read-ahead machine's table tests cover
            // that; here the count is printed, not bounded, because a
            // loaded machine adds direct reads. What tells a stream apart
            // from small ranged reads (2 MiB each, once) is its size: one
            // GET asks for 16 MiB or more. A machine loaded enough that the
            // first block comes slower than 256 MiB/s makes the read-ahead
            // machine take the link for a slow one and fetch 8-16 MiB parts
            // side by side instead (ParallelReads tests that path), so 8 MiB
            // is the bound here.
            print("sequential cat of 64 MiB: \(media.count) media GETs: \(media.map { $0.byteRange ?? "whole" })")
            let spans = media.compactMap { request -> Int64? in
                // No Range header: the whole object.
                guard let header = request.byteRange else { return Int64(size) }
                guard header.hasPrefix("bytes=") else { return nil }
                let bounds = header.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
                guard bounds.count == 2, let first = Int64(bounds[0]) else { return nil }
                // An open-ended range runs to the end of the object.
                return (Int64(bounds[1]) ?? Int64(size) - 1) - first + 1
            }
            #expect((spans.max() ?? 0) >= 8 << 20, "the largest GET spans \(spans.max() ?? 0) bytes: \(media.map { $0.byteRange ?? "whole" })")
            let copied = try Data(contentsOf: URL(fileURLWithPath: out))
            #expect(copied.count == size)
            #expect(copied == data, "the bytes read differ from the object's")
        }

        @Test("cp of a 300 MiB object matches by md5; dd at random offsets", .timeLimit(.minutes(10)))
        func bigObject() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("big300")
            let started = ContinuousClock.now
            let source = try Self.bigFile.get()
            defer { Scratch.remove(source) }
            let generated = ContinuousClock.now
            let expected = try await Tools.md5(source)
            try await gcs.putFile("\(prefix)/big.bin", path: source)
            let uploaded = ContinuousClock.now
            let resource = try #require(try await gcs.resource("\(prefix)/big.bin"))
            #expect((resource["size"] as? String) == "\(Self.bigSize)", "the emulator holds \(resource["size"] ?? "nil") bytes")

            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }

            // Random reads first, while nothing is cached.
            let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: source))
            defer { try? handle.close() }
            try await Self.checkRanges(
                mount.at("big.bin"), source: handle, size: Self.bigSize, ranges: Self.ranges(size: Self.bigSize, random: 10, seed: 300))
            let ddDone = ContinuousClock.now

            let out = "\(scratch)/big.cp"
            let cp = try await Tools.run("/bin/cp", [mount.at("big.bin"), out], timeout: .seconds(400))
            #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
            let copied = ContinuousClock.now
            let md5 = try await Tools.md5(out)
            #expect(md5 == expected, "cp of the 300 MiB object: md5 \(md5), uploaded \(expected)")
            print("300 MiB: generate \(generated - started), upload \(uploaded - generated), dd \(ddDone - uploaded), cp \(copied - ddDone)")
        }
    }
}
