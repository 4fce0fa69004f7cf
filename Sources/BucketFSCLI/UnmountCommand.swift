import ArgumentParser
import Foundation

/// `bucketfs unmount MOUNTPOINT`: asks the kernel to detach the mount
/// (fusermount3 -u); the bucketfs process sees its session end, finishes
/// pending work and exits.
struct UnmountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unmount", abstract: "Unmount a bucketfs mount.")

    @Argument(help: "The mountpoint.")
    var mountpoint: String

    @Flag(help: "Detach even if busy (fusermount3 -uz).")
    var lazy = false

    func run() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/fusermount3")
        process.arguments = [lazy ? "-uz" : "-u", mountpoint]
        do {
            try process.run()
        } catch {
            eprint("bucketfs: cannot run fusermount3: \(error.localizedDescription)")
            throw ExitCode(1)
        }
        process.waitUntilExit()
        if process.terminationStatus != 0 { throw ExitCode(process.terminationStatus) }
    }
}
