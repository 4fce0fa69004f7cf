import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// Ctrl-C reaches a process waiting on the network in the mount: the
    /// kernel sends FUSE_INTERRUPT, the request answers EINTR at once, and
    /// what the process wrote is still uploaded once the service answers.
    @Suite struct Interrupts {
        // Checks semantics.md#net-interrupt
        @Test("Ctrl-C during an upload outage: cp exits within 3 s of SIGINT, the object arrives byte-identical within 60 s of the outage ending", .timeLimit(.minutes(3)))
        func interruptedCloseDuringAnOutage() async throws {
            let proxy = try await FaultProxy()
            defer { proxy.stop() }
            let prefix = MountEnv.uniquePrefix("interrupt")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let data = MountEnv.pattern(5 << 20, seed: 1210)
            try data.write(to: URL(fileURLWithPath: scratch + "/big.bin"))
            let mount = try await Mount.start(endpoint: proxy.endpoint, prefix: prefix)
            defer { mount.cleanup() }

            let outage: Duration = .seconds(40)
            try await proxy.fault([["path_contains": "/upload/", "status": 503, "for_seconds": 40]])
            let outageEnds = ContinuousClock.now + outage
            let cp = try Tools.Running("/bin/cp", [scratch + "/big.bin", mount.at("big.bin")])
            defer { cp.kill() }
            try await Task.sleep(for: .seconds(5))
            #expect(cp.isRunning, "cp should still be waiting in close during the outage: \(cp.result().summary)")
            let signalled = ContinuousClock.now
            Glibc.kill(cp.pid, SIGINT)
            let exited = await cp.wait(.seconds(3))
            let took = ContinuousClock.now - signalled
            #expect(exited, "cp still running \(took) after SIGINT\nlog:\n\(mount.logTail())")
            let result = cp.result()
            #expect(result.signaled && result.status == SIGINT, "cp should die of the SIGINT: \(result.summary)")
            print(exited ? "cp exited \(took) after SIGINT, in close during an upload outage" : "cp still ran \(took) after SIGINT")
            let log = (try? String(contentsOfFile: mount.logFile, encoding: .utf8)) ?? ""
            #expect(log.split(separator: "\n").contains { $0.contains("FUSE request interrupted") && $0.contains("flush") },
                    "the kernel should have interrupted the FLUSH\nlog:\n\(mount.logTail())")

            // The upload went on: the object arrives once the outage is over.
            let name = "\(prefix)/big.bin"
            let uploaded = try await proxy.gcs.waitForObject(name, timeout: outageEnds - ContinuousClock.now + .seconds(60))
            #expect(uploaded != nil, "big.bin was not uploaded within 60 s of the outage ending\nlog:\n\(mount.logTail())")
            if uploaded != nil { try await ObjectChecks.expect(proxy.gcs, name, holds: data, "after the interrupted close") }
            print("big.bin in the bucket \(ContinuousClock.now - outageEnds) after the outage ended")
        }
    }
}
