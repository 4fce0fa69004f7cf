import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// scripts/install.sh into a temporary prefix, with the built binary and
    /// manual generator (a release build is the script's default, not the
    /// test's business): each installed piece is checked by the program that
    /// uses it — the binary runs, man(1) renders the page, bash loads the
    /// completion, and the mount helper mounts a bucket with the installed
    /// binary. `mount -t fuse.bucketfs` through /sbin is SystemMountTests'
    /// (it owns /usr/local/bin/bucketfs under a lock); here the helper is run
    /// the way mount(8) runs it, so nothing outside the prefix is touched.
    @Suite struct Install {
        static let subcommands = ["mount", "unmount", "ls", "put", "get", "cp", "status"]

        /// Runs install.sh into a fresh directory and returns it; the caller
        /// removes it.
        static func installIntoTemporaryPrefix() async throws -> String {
            var template = Array((FileManager.default.temporaryDirectory.path + "/bucketfs-install-XXXXXX").utf8CString)
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                throw HarnessError("mkdtemp: \(String(cString: strerror(errno)))")
            }
            let prefix = String(cString: made)
            let script = try MountEnv.repo() + "/scripts/install.sh"
            let installed = try await Tools.run(
                "/bin/bash",
                [script, "--binary", try MountEnv.binary(), "--generate-manual", try MountEnv.manualGenerator(), prefix])
            guard installed.ok else {
                try? FileManager.default.removeItem(atPath: prefix)
                throw HarnessError("install.sh: \(installed.summary)")
            }
            return prefix
        }

        @Test("install.sh installs the binary, man page, completions and mount helper into a prefix")
        func installsEachPiece() async throws {
            let prefix = try await Self.installIntoTemporaryPrefix()
            defer { try? FileManager.default.removeItem(atPath: prefix) }

            let binary = prefix + "/bin/bucketfs"
            let help = try await Tools.run(binary, ["--help"])
            let builtHelp = try await Tools.run(try MountEnv.binary(), ["--help"])
            #expect(help.ok && help.out.contains("USAGE: bucketfs"), "\(help.summary)")
            #expect(help.out == builtHelp.out)

            // The man page: where man(1) looks under the prefix, and rendered by it.
            let page = prefix + "/share/man/man1/bucketfs.1"
            let source = try String(contentsOfFile: page, encoding: .utf8)
            #expect(source.contains(".Dt BUCKETFS 1") || source.contains(".TH BUCKETFS 1"), "\(source.prefix(300))")
            let rendered = try await Tools.run("/usr/bin/env", ["MANPATH=\(prefix)/share/man", "MANWIDTH=200", "/usr/bin/man", "bucketfs"])
            #expect(rendered.ok, "man bucketfs: \(rendered.summary)")
            #expect(rendered.out.contains("Mount a Cloud Storage bucket as a filesystem."))
            // Each subcommand is an item of DESCRIPTION: its name starts a line.
            let itemNames = Set(rendered.lines.compactMap { $0.split(separator: " ").first.map(String.init) })
            for name in Self.subcommands {
                #expect(itemNames.contains(name), "man page lacks the \(name) subcommand")
            }
            #expect(rendered.out.contains("--stat-ttl"), "man page lacks mount's options")
            let local = try await Tools.run("/usr/bin/env", ["MANWIDTH=200", "/usr/bin/man", "-l", page])
            #expect(local.ok && local.out == rendered.out, "man -l: \(local.summary)")

            // Completions: each names the subcommands and mount's options.
            let completions = [
                prefix + "/share/bash-completion/completions/bucketfs",
                prefix + "/share/zsh/site-functions/_bucketfs",
                prefix + "/share/fish/vendor_completions.d/bucketfs.fish",
            ]
            for path in completions {
                let script = try String(contentsOfFile: path, encoding: .utf8)
                for name in Self.subcommands { #expect(script.contains(name), "\(path) lacks \(name)") }
                #expect(script.contains("stat-ttl"), "\(path) lacks mount's options")
            }
            #expect(try String(contentsOfFile: completions[1], encoding: .utf8).hasPrefix("#compdef bucketfs"))
            let loaded = try await Tools.run("/bin/bash", ["-c", "source \"$0\" && complete -p bucketfs", completions[0]])
            #expect(loaded.ok && loaded.lines == ["complete -o filenames -F _bucketfs bucketfs"], "bash completion: \(loaded.summary)")
        }

        @Test("the installed mount.fuse.bucketfs mounts with the installed binary, as mount(8) runs it")
        func mountHelperRunsInstalledBinary() async throws {
            let prefix = try await Self.installIntoTemporaryPrefix()
            defer { try? FileManager.default.removeItem(atPath: prefix) }

            let endpoint = try MountEnv.emulator()
            let objectPrefix = MountEnv.uniquePrefix("install")
            try await DirectGCS.emulator().put("\(objectPrefix)/hello.txt", Data("hi from the helper\n".utf8))
            let dirs = try Mount()
            defer { dirs.cleanup() }
            // mount(8) runs /sbin/mount.fuse.<subtype> SOURCE TARGET -o OPTIONS;
            // _netdev is one of the fstab-only options the helper must drop.
            let options = "_netdev,endpoint=\(endpoint),anonymous,cache_dir=\(dirs.cacheDir),log_file=\(dirs.logFile)"
            let helper = prefix + "/sbin/mount.fuse.bucketfs"
            let mounted = try await Tools.run(helper, ["gs://\(MountEnv.bucket)/\(objectPrefix)", dirs.path, "-o", options])
            try #require(mounted.ok, "mount.fuse.bucketfs: \(mounted.summary)")
            #expect(await Kernel.waitMounted(dirs.path, true))

            let server = try #require(Kernel.bucketfsProcess(serving: dirs.path), "no bucketfs process serves \(dirs.path)")
            let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(server)/exe")
            #expect(executable == URL(fileURLWithPath: prefix).resolvingSymlinksInPath().path + "/bin/bucketfs")
            #expect(try String(contentsOfFile: dirs.at("hello.txt"), encoding: .utf8) == "hi from the helper\n")

            let unmounted = try await Tools.run("/usr/bin/fusermount3", ["-u", dirs.path])
            #expect(unmounted.ok, "fusermount3 -u: \(unmounted.summary)")
            #expect(await Kernel.waitMounted(dirs.path, false))
        }
    }
}
