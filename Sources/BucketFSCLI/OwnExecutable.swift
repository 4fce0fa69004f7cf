import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// This program's executable and its neighbours: where the background
/// mount, `fuse-fd-mount`'s exec and `bucketfs csi` find what they run.
public enum OwnExecutable {
    /// The running executable (/proc/self/exe), else argv[0].
    public static var path: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// `name` in the directory of the running executable.
    public static func sibling(_ name: String) -> String {
        URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// Replaces this process with `executable` run as `arguments` (argv,
    /// argv[0] included); returns only by throwing, with `hint` after the
    /// cause.
    static func exec(_ executable: String, _ arguments: [String], hint: String = "") throws(CLIError) -> Never {
        // strdup'd copies live until execv returns (only on failure), so
        // the pointers handed over stay valid for the whole call.
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        execv(executable, argv)
        throw .bucket("cannot run \(executable): \(String(cString: strerror(errno)))\(hint)", exitCode: 1)
    }
}
