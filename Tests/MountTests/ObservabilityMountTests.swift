import Foundation
import TestServerClient
import Testing
import Transport
#if canImport(Glibc)
import Glibc
import TestSupport
#endif

extension MountTests {
    /// `--metrics-address` (Prometheus, scraped from a real mount) and
    /// `--log-format json`.
    @Suite struct Observability {
        /// One scrape: `name{labels}` -> value, and the raw text.
        struct Scrape {
            let text: String
            let samples: [String: Double]

            /// The sum over every sample of `name` whose labels contain all of `labels`.
            func value(_ name: String, _ labels: [String] = []) -> Double {
                samples.filter { key, _ in
                    let base = key.prefix { $0 != "{" }
                    return base == name && labels.allSatisfy { key.contains($0) }
                }.values.reduce(0, +)
            }
        }

        static func scrape(_ port: UInt16) async throws -> Scrape {
            let response = try await DirectGCS.transport.send(HTTPRequest(method: .get, url: "http://127.0.0.1:\(port)/metrics", isIdempotent: true))
            #expect(response.status == 200)
            #expect(response.headers["Content-Type"]?.hasPrefix("text/plain; version=0.0.4") == true)
            let text = String(decoding: response.body, as: UTF8.self)
            var samples: [String: Double] = [:]
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
                samples[String(line[..<space])] = value
            }
            return Scrape(text: text, samples: samples)
        }

        @Test("a scrape of a real mount: FUSE, HTTP, bytes, block cache and status gauges move as the work done says")
        func scrapeCounters() async throws {
            let port = try freePort()
            let prefix = MountEnv.uniquePrefix("metrics")
            let mount = try await Mount.start(
                endpoint: try MountEnv.emulator(), prefix: prefix, options: ["--metrics-address", "127.0.0.1:\(port)"])
            defer { mount.cleanup() }
            let before = try await Self.scrape(port)
            #expect(before.value("bucketfs_recovery_entries") == 0)
            #expect(before.value("bucketfs_block_cache_capacity_bytes") == Double(1 << 30))

            let size = 3 << 20
            let data = MountEnv.pattern(size, seed: 31)
            try data.write(to: URL(fileURLWithPath: mount.at("payload.bin")))
            #expect(try Data(contentsOf: URL(fileURLWithPath: mount.at("payload.bin"))) == data)
            _ = try FileManager.default.contentsOfDirectory(atPath: mount.path)
            #expect(!FileManager.default.fileExists(atPath: mount.at("absent.txt")))

            let after = try await Self.scrape(port)
            func delta(_ name: String, _ labels: [String] = []) -> Double { after.value(name, labels) - before.value(name, labels) }
            #expect(delta("bucketfs_written_bytes_total") == Double(size))
            #expect(delta("bucketfs_read_bytes_total") >= Double(size))
            #expect(delta("bucketfs_fuse_request_duration_seconds_count", [#"operation="create""#]) >= 1)
            #expect(delta("bucketfs_fuse_request_duration_seconds_count", [#"operation="write""#]) >= 3)
            #expect(delta("bucketfs_fuse_request_duration_seconds_count", [#"operation="lookup""#]) >= 1)
            #expect(delta("bucketfs_fuse_errors_total", [#"operation="lookup""#, #"errno="ENOENT""#]) >= 1)
            // The upload: one POST (multipart or resumable start) answered 200.
            #expect(delta("bucketfs_http_request_duration_seconds_count", [#"method="POST""#, #"status="200""#]) >= 1, "\(after.text)")
            // The listings (the root's, the lookups' probes): GETs answered
            // 200, whose timer must not be the no-op one made before the
            // metrics backend existed (the preflight's GET came first).
            #expect(delta("bucketfs_http_request_duration_seconds_count", [#"method="GET""#, #"status="200""#]) >= 1, "\(after.text)")
            #expect(after.text.contains("# TYPE bucketfs_fuse_request_duration_seconds histogram"))
            #expect(after.text.contains(#"bucketfs_fuse_request_duration_seconds_bucket{operation="write",le="0.001"}"#))
            #expect(after.value("bucketfs_uploads_in_flight") == 0)
            #expect(after.value("bucketfs_pending_uploads") == 0)
            #expect(delta("bucketfs_http_retries_total") == 0)

            // A clean unmount (control socket and metrics endpoint stopped
            // on the way) logs nothing at error level.
            let unmounted = try await runBucketfs(["unmount", mount.path])
            #expect(unmounted.ok, "\(unmounted.summary)")
            let ended = await mount.waitForExit(.seconds(10))
            #expect(ended.exited, "bucketfs still runs 10 s after `bucketfs unmount`")
            #expect(mount.logTail().contains("unmounted") && mount.errorLogLines().isEmpty, "\(mount.errorLogLines())")
        }

        @Test("a second mount on the same cache directory reads from the block cache: hits counted")
        func blockCacheHits() async throws {
            let prefix = MountEnv.uniquePrefix("metricscache")
            let gcs = try DirectGCS.emulator()
            // One block: the first mount's read stores it whole.
            let data = MountEnv.pattern(1 << 20, seed: 32)
            try await gcs.put("\(prefix)/cached.bin", data)
            let firstPort = try freePort()
            let first = try await Mount.start(
                endpoint: try MountEnv.emulator(), prefix: prefix, options: ["--metrics-address", "127.0.0.1:\(firstPort)"])
            #expect(try Data(contentsOf: URL(fileURLWithPath: first.at("cached.bin"))) == data)
            // A cold read is a miss, also when read-ahead fetched the block
            // (that read never looks in the cache, the prefetch did).
            let cold = try await Self.scrape(firstPort)
            #expect(cold.value("bucketfs_block_cache_misses_total") >= 1, "\(cold.text)")
            #expect(cold.value("bucketfs_block_cache_hits_total") == 0)
            let cacheDir = first.cacheDir
            Tools.runBlocking("/usr/bin/fusermount3", ["-u", first.path])
            let ended = await first.waitForExit(.seconds(20))
            #expect(ended.exited, "the first mount still runs 20 s after fusermount3 -u")
            // The block is written in the background; the mount must finish
            // that before it exits, or the second mount finds no block (and,
            // its read served by read-ahead, counted neither hit nor miss).
            #expect(try first.cachedBlockCount() == 1)
            let port = try freePort()
            let second = try await Mount.start(
                endpoint: try MountEnv.emulator(), prefix: prefix, options: ["--metrics-address", "127.0.0.1:\(port)"],
                cacheDir: cacheDir)
            defer {
                second.cleanup()
                first.cleanup()
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: second.at("cached.bin"))) == data)
            let scrape = try await Self.scrape(port)
            #expect(scrape.value("bucketfs_block_cache_hits_total") >= 1, "\(scrape.text)")
            #expect(scrape.value("bucketfs_block_cache_misses_total") == 0)
            #expect(scrape.value("bucketfs_block_cache_bytes") >= Double(1 << 20))
        }

        @Test("retries and the recovery folder show in the metrics: a 503 retried, a lost conflict's bytes counted")
        func retriesAndRecovery() async throws {
            let bucket = "mounttests"
            let proxy = try await FaultProxy(upstream: try MountEnv.fake(), bucket: bucket)
            defer { proxy.stop() }
            let prefix = MountEnv.uniquePrefix("metricsrecovery")
            try await proxy.gcs.put("\(prefix)/shared.txt", Data("original\n".utf8))
            let port = try freePort()
            let mount = try await Mount.start(
                endpoint: proxy.endpoint, bucket: bucket, prefix: prefix,
                options: ["--metrics-address", "127.0.0.1:\(port)", "--recovery-retry-interval", "0"])
            defer { mount.cleanup() }
            try await proxy.fault([["method": "GET", "path_contains": "shared.txt", "status": 503, "count": 1]])
            // The lookup's GET is answered 503 once and retried.
            let fd = open(mount.at("shared.txt"), O_WRONLY | O_CLOEXEC)
            #expect(fd >= 0, "open: errno \(errno)\nlog:\n\(mount.logTail())")
            #expect(Posix.writeAll(fd, Data("mine\n".utf8)) == nil)
            try await proxy.gcs.put("\(prefix)/shared.txt", Data("theirs\n".utf8))
            #expect(close(fd) == -1 && errno == ESTALE)
            let scrape = try await Self.scrape(port)
            #expect(scrape.value("bucketfs_http_retries_total", [#"method="GET""#]) >= 1, "\(scrape.text)")
            #expect(scrape.value("bucketfs_http_request_duration_seconds_count", [#"method="GET""#, #"status="503""#]) >= 1)
            #expect(scrape.value("bucketfs_recovery_entries") == 1)
            #expect(scrape.value("bucketfs_fuse_errors_total", [#"operation="flush""#, #"errno="ESTALE""#]) >= 1, "\(scrape.text)")
        }

        @Test("without --metrics-address the mount listens on no TCP port")
        func noListenerByDefault() async throws {
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: MountEnv.uniquePrefix("nometrics"))
            defer { mount.cleanup() }
            let pid = try #require(mount.pid)
            let listening = Self.listeningTCPInodes()
            let sockets = Self.socketInodes(of: pid)
            #expect(!sockets.isEmpty, "the mount holds sockets (curl, /dev/fuse aside)")
            #expect(sockets.isDisjoint(with: listening), "a listening TCP socket of pid \(pid)")
        }

        @Test("a bad metrics address exits 64; an address in use exits 5 and names it")
        func badAddresses() async throws {
            let dirs = try Mount()
            defer { dirs.cleanup() }
            let base = ["mount", "--endpoint", try MountEnv.emulator(), "--anonymous", "gs://\(MountEnv.bucket)", dirs.path,
                        "--cache-dir", dirs.cacheDir]
            let bad = try await runBucketfs(base + ["--metrics-address", "127.0.0.1"])
            #expect(bad.status == 64 && bad.stderr.contains("HOST:PORT"), "\(bad.summary)")
            // A port this test holds open.
            let holder = try Tools.Running(try MountEnv.variable("BUCKETFS_TEST_PYTHON"), ["-c", """
                import socket, sys, time
                s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
                open(sys.argv[1], "w").write(str(s.getsockname()[1]))
                time.sleep(60)
                """, dirs.base + "/port"])
            defer { holder.kill() }
            let deadline = ContinuousClock.now + .seconds(10)
            while (try? String(contentsOfFile: dirs.base + "/port", encoding: .utf8)).flatMap({ UInt16($0) }) == nil,
                  ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            let port = try #require((try? String(contentsOfFile: dirs.base + "/port", encoding: .utf8)).flatMap { UInt16($0) })
            let busy = try await runBucketfs(base + ["--metrics-address", "127.0.0.1:\(port)"])
            #expect(busy.status == 5 && busy.stderr.contains("cannot serve metrics on 127.0.0.1:\(port)"), "\(busy.summary)")
            #expect(!Kernel.isMounted(dirs.path))
        }

        @Test("--log-format json: one object per line with operation, path, errno and request id, never the token")
        func jsonLogs() async throws {
            let dirs = try Mount()
            defer { dirs.cleanup() }
            let token = "ya29.secret-token-\(UUID().uuidString)"
            let tokenFile = dirs.base + "/token"
            try Data(token.utf8).write(to: URL(fileURLWithPath: tokenFile))
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("jsonlog")
            try await gcs.put("\(prefix)/there.txt", Data("x\n".utf8))
            // --token-file instead of the harness's --anonymous: every
            // request carries the token in its Authorization header.
            let mount = try await Mount.start(
                endpoint: try MountEnv.emulator(), prefix: prefix,
                options: ["--token-file", tokenFile, "--log-format", "json", "--log-level", "trace"])
            defer { mount.cleanup() }
            try Data("hello\n".utf8).write(to: URL(fileURLWithPath: mount.at("new.txt")))
            #expect(!FileManager.default.fileExists(atPath: mount.at("missing.txt")))
            let log = try String(contentsOfFile: mount.logFile, encoding: .utf8)
            let lines = log.split(separator: "\n")
            #expect(lines.count >= 5, "\(log)")
            var objects: [[String: Any]] = []
            for line in lines {
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                    Issue.record("not a JSON object: \(line)")
                    continue
                }
                objects.append(object)
            }
            #expect(objects.allSatisfy { $0["time"] is String && $0["level"] is String && $0["label"] is String && $0["message"] is String })
            // An ISO 8601 instant in UTC, zone included, within this test's run.
            let times = objects.compactMap { ($0["time"] as? String).flatMap { try? Date($0, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted)) } }
            #expect(times.count == objects.count, "times without a zone: \(objects.prefix(2).map { $0["time"] ?? "none" })")
            #expect(times.allSatisfy { abs($0.timeIntervalSinceNow) < 600 })
            #expect(!log.contains(token), "the token appears in the log")
            #expect(!log.localizedCaseInsensitiveContains("authorization: bearer"))
            let failed = objects.filter { $0["message"] as? String == "FUSE request failed" && $0["errno"] as? String == "ENOENT" }
            #expect(failed.contains { $0["operation"] as? String == "lookup" && ($0["request"] as? String).flatMap { UInt64($0) } != nil },
                    "no lookup failure with errno and request id in \(failed.prefix(3))")
            #expect(objects.contains { $0["request"] != nil && $0["label"] as? String == "bucketfs.transport" } ||
                    objects.contains { $0["request"] != nil && $0["label"] as? String == "bucketfs.fs" },
                    "no line of the layers below carries the request id")
        }

        // MARK: - /proc helpers

        static func listeningTCPInodes() -> Set<String> {
            var inodes: Set<String> = []
            for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
                guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
                for line in text.split(separator: "\n").dropFirst() {
                    let fields = line.split(separator: " ")
                    if fields.count > 9, fields[3] == "0A" { inodes.insert(String(fields[9])) }
                }
            }
            return inodes
        }

        static func socketInodes(of pid: pid_t) -> Set<String> {
            let dir = "/proc/\(pid)/fd"
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
            return Set(fds.compactMap { fd in
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + fd),
                      target.hasPrefix("socket:[") else { return nil }
                return String(target.dropFirst(8).dropLast())
            })
        }
    }
}
