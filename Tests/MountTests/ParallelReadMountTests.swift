import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// A sequential read over a slow link (each connection throttled, as a
    /// cloud store's are) goes out as parallel ranged GETs of one
    /// generation, and the bytes the mount returns are the object's.
    /// fake_gcs.py behind a fault proxy of the test's own that paces every
    /// download answer at 4 MiB/s per connection.
    @Suite struct ParallelReads {
        static let bucket = "mounttests"
        static let perConnection = 4 << 20

        // Checks semantics.md#shows-reads
        @Test("a sequential read on a slow link is parallel ranged GETs of one generation, each byte once", .timeLimit(.minutes(2)))
        func slowLinkReadsInParts() async throws {
            let proxy = try await FaultProxy(upstream: try MountEnv.fake(), bucket: Self.bucket)
            defer { proxy.stop() }
            let prefix = MountEnv.uniquePrefix("parallel-read")
            let data = MountEnv.pattern(64 << 20, seed: 2911)
            try await proxy.gcs.put(prefix + "/big.bin", data)
            let stored = try #require(try await proxy.gcs.resource(prefix + "/big.bin"))
            let generation = try #require(stored["generation"] as? String)
            let mount = try await Mount.start(endpoint: proxy.endpoint, bucket: Self.bucket, prefix: prefix)
            defer { mount.cleanup() }
            try await proxy.fault([["method": "GET", "path_contains": "alt=media",
                                    "throttle_bytes_per_second": Self.perConnection, "for_seconds": 120]])
            try await proxy.clearRequests()

            // 1 MiB at a time, as dd and cp read (a single read of the whole
            // file would have the kernel ask for all of it before any
            // request could show the link).
            let started = ContinuousClock.now
            let file = try FileHandle(forReadingFrom: URL(fileURLWithPath: mount.at("big.bin")))
            var read = Data()
            while let chunk = try file.read(upToCount: 1 << 20), !chunk.isEmpty { read.append(chunk) }
            try file.close()
            let elapsed = ContinuousClock.now - started
            #expect(read.count == data.count && read == data, "the bytes read differ from the object's (\(read.count) bytes)")

            let gets = try await proxy.requests().filter { $0.query.contains("alt=media") }
            let ranges = gets.compactMap { $0.byteRange.flatMap(Self.byteRange) }.sorted { $0.lowerBound < $1.lowerBound }
            #expect(ranges.count == gets.count, "every download is ranged: \(gets.map { $0.byteRange ?? "-" })")
            let parts = ranges.filter { $0.count == 8 << 20 && $0.lowerBound % (8 << 20) == 0 }
            #expect(parts.count >= 3, "8 MiB parts once the first block has shown the link: \(ranges)")
            #expect(gets.allSatisfy { $0.query.contains("generation=\(generation)") }, "every part names the generation: \(gets.map(\.query))")
            // The requests tile the file: each starts where the ones before
            // it end. The stream's first refills may be single blocks (a
            // loaded CI machine saw 0, 1 and 2 MiB fetched a block at a
            // time before the first part), and a read of the kernel's that
            // overtakes the stream may fetch a block the stream fetches
            // too (1 MiB): a few such overlaps, never a gap.
            var end = 0
            var overlaps = 0
            for range in ranges {
                if range.lowerBound < end {
                    overlaps += 1
                    #expect(range.count <= 1 << 20, "only a block read directly overlaps the stream: \(ranges)")
                } else {
                    #expect(range.lowerBound == end, "the requests tile the file: \(ranges)")
                }
                end = max(end, range.upperBound)
            }
            #expect(end == data.count)
            #expect(overlaps <= 3, "few direct reads: \(ranges)")
            // Side by side: the most downloads in flight at one moment.
            let spans = gets.map { ($0.time ?? 0, $0.done ?? .infinity) }
            let overlap = spans.map { span in spans.filter { $0.0 <= span.0 && $0.1 > span.0 }.count }.max() ?? 0
            #expect(overlap >= 4, "at most \(overlap) downloads at once:\n\(gets.map { "\($0.byteRange ?? "-") \($0.time ?? 0) \($0.done ?? 0)" })")
            // One connection alone needs 16 s for 64 MiB.
            #expect(elapsed < .seconds(10), "the read took \(elapsed)")
        }

        /// "bytes=A-B" as A..<(B+1).
        static func byteRange(_ header: String) -> Range<Int>? {
            guard header.hasPrefix("bytes=") else { return nil }
            let bounds = header.dropFirst(6).split(separator: "-").compactMap { Int($0) }
            return bounds.count == 2 ? bounds[0]..<(bounds[1] + 1) : nil
        }
    }
}
