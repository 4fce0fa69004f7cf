import Foundation
import TestServerClient
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// scripts/install.sh into a temporary prefix, with the built binary
    /// (a release build is the script's default, not the test's business)
    /// and a `swift` in PATH that records its call and fails: with --binary
    /// the script builds nothing. Each installed piece is checked by the
    /// program that uses it — the binary runs, man(1) and groff render the
    /// page, bash loads the completion, and the mount helper mounts a bucket
    /// with the installed binary. `mount -t fuse.bucketfs` through /sbin is
    /// SystemMountTests' (it owns /usr/local/bin/bucketfs under a lock); here
    /// the helper is run the way mount(8) runs it, so nothing outside the
    /// prefix is touched.
    @Suite struct Install {
        static let subcommands = ["mount", "unmount", "ls", "put", "get", "cp", "status"]
        /// The PATH mount(8) gives its helpers, whatever the caller's is.
        static let mountHelperPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

        static func temporaryDirectory(_ label: String) throws -> String {
            var template = Array((FileManager.default.temporaryDirectory.path + "/bucketfs-\(label)-XXXXXX").utf8CString)
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                throw HarnessError("mkdtemp: \(String(cString: strerror(errno)))")
            }
            return String(cString: made)
        }

        /// Runs install.sh into a fresh directory and returns it with the
        /// script's result; the caller removes it. Fails when the script
        /// called `swift`.
        static func installIntoTemporaryPrefix() async throws -> (prefix: String, result: ToolResult) {
            let prefix = try temporaryDirectory("install")
            let stubs = try temporaryDirectory("install-stubs")
            defer { try? FileManager.default.removeItem(atPath: stubs) }
            let record = stubs + "/swift-called"
            try Data("#!/bin/sh\necho \"swift $*\" >>'\(record)'\nexit 1\n".utf8)
                .write(to: URL(fileURLWithPath: stubs + "/swift"))
            chmod(stubs + "/swift", 0o755)
            let path = stubs + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
            let script = try MountEnv.repo() + "/scripts/install.sh"
            let installed = try await Tools.run(
                "/usr/bin/env", ["PATH=\(path)", "/bin/bash", script, "--binary", try MountEnv.binary(), prefix])
            let swiftCalls = (try? String(contentsOfFile: record, encoding: .utf8)) ?? ""
            guard installed.ok, swiftCalls.isEmpty else {
                try? FileManager.default.removeItem(atPath: prefix)
                throw HarnessError("install.sh: \(installed.summary); swift calls: \(swiftCalls)")
            }
            return (prefix, installed)
        }

        @Test("install.sh installs the binary, man page, completions and mount helper into a prefix")
        func installsEachPiece() async throws {
            let (prefix, installed) = try await Self.installIntoTemporaryPrefix()
            defer { try? FileManager.default.removeItem(atPath: prefix) }
            // mount(8) finds neither the helper (not in /sbin) nor the binary
            // (its PATH lacks PREFIX/bin): the script says which link to make.
            #expect(installed.stderr.contains("ln -sf \(prefix)/sbin/mount.fuse.bucketfs /sbin/mount.fuse.bucketfs"),
                    "\(installed.summary)")

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
            #expect(rendered.out.contains("Mount a Cloud Storage bucket as a filesystem"))
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

        @Test("the installed man page renders without groff warnings, with its sections, exit codes and an intact fstab line")
        func manPageRendersCleanly() async throws {
            let (prefix, _) = try await Self.installIntoTemporaryPrefix()
            defer { try? FileManager.default.removeItem(atPath: prefix) }
            let page = prefix + "/share/man/man1/bucketfs.1"

            // groff with every warning, and man(1)'s own check.
            let groff = try await Tools.run("/usr/bin/groff", ["-ww", "-mandoc", "-Tutf8", "-z", page])
            #expect(groff.ok && groff.stderr.isEmpty, "groff -ww: \(groff.summary)")
            let checked = try await Tools.run("/usr/bin/env", ["MANWIDTH=80", "/usr/bin/man", "--warnings", "-l", page])
            #expect(checked.ok && checked.stderr.isEmpty, "man --warnings: \(checked.summary)")
            let text = checked.out
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)

            // The sections, each a heading line of its own.
            for heading in ["NAME", "SYNOPSIS", "DESCRIPTION", "ENVIRONMENT", "FILES", "EXIT STATUS", "SEE ALSO"] {
                #expect(lines.contains(heading), "no \(heading) section")
            }
            // Hidden commands and options stay hidden.
            for hidden in ["print-option-table", "print-manual-page", "experimental-dump-help", "generate-completion-script"] {
                #expect(!text.contains(hidden), "the page shows \(hidden)")
            }
            // EXIT STATUS names each code mount uses, each an item of its own.
            let exitStart = try #require(lines.firstIndex(of: "EXIT STATUS"))
            let exitEnd = lines[(exitStart + 1)...].firstIndex { !$0.isEmpty && !$0.hasPrefix(" ") } ?? lines.endIndex
            let exitItems = lines[(exitStart + 1)..<exitEnd].compactMap { $0.split(separator: " ").first.map(String.init) }
            for code in ["0", "1", "2", "3", "4", "5", "64"] {
                #expect(exitItems.contains(code), "EXIT STATUS lacks \(code): \(lines[exitStart..<exitEnd].joined(separator: "\n"))")
            }
            // The fstab example of mount's description on one line, as typed,
            // and no word broken at a hyphen anywhere.
            #expect(lines.contains { $0.range(of: #"^ +gs://\S+ +/\S+ +fuse\.bucketfs +\S*allow_other\S* +0 0$"#, options: .regularExpression) != nil },
                    "no intact fstab line in:\n\(text)")
            let broken = lines.filter { $0.range(of: #"\p{L}[-\x{2010}]$"#, options: .regularExpression) != nil }
            #expect(broken.isEmpty, "words broken at a hyphen: \(broken)")
            // Every option mount's --help shows is described, as typed (ASCII hyphens).
            let help = try await Tools.run(try MountEnv.binary(), ["mount", "--help"])
            let options = Set(help.out.matches(of: /--[a-z][a-z-]+/).map { String($0.output) })
            #expect(options.count > 20, "\(help.summary)")
            for option in options { #expect(text.contains(option), "the page lacks \(option)") }
        }

        @Test("mount(8) runs a FUSE helper with its own PATH, not the caller's: another PREFIX needs the /sbin link")
        func mountGivesHelpersItsOwnPath() async throws {
            // fuse3's /sbin/mount.fuse runs `TYPE SOURCE TARGET -o OPTIONS`
            // for type fuse.TYPE through /bin/sh: with TYPE sh and a script as
            // SOURCE, the script reports the PATH it got, then fails the mount.
            let dir = try Self.temporaryDirectory("mount-path")
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let report = dir + "/path"
            let probe = dir + "/probe"
            try Data("#!/bin/sh\nprintf %s \"$PATH\" >'\(report)'\nexit 1\n".utf8).write(to: URL(fileURLWithPath: probe))
            chmod(probe, 0o755)
            try FileManager.default.createDirectory(atPath: dir + "/mnt", withIntermediateDirectories: true)
            let mounted = try await Tools.run(
                "/usr/bin/env", ["PATH=\(dir):/usr/bin:/bin:/usr/sbin:/sbin", "mount", "-t", "fuse.sh", probe, dir + "/mnt"])
            #expect(!mounted.ok, "\(mounted.summary)")
            #expect(try String(contentsOfFile: report, encoding: .utf8) == Self.mountHelperPath)
        }

        @Test("the installed mount.fuse.bucketfs mounts with the installed binary, as mount(8) runs it")
        func mountHelperRunsInstalledBinary() async throws {
            let (prefix, _) = try await Self.installIntoTemporaryPrefix()
            defer { try? FileManager.default.removeItem(atPath: prefix) }

            let endpoint = try MountEnv.emulator()
            let objectPrefix = MountEnv.uniquePrefix("install")
            try await DirectGCS.emulator().put("\(objectPrefix)/hello.txt", Data("hi from the helper\n".utf8))
            let dirs = try Mount()
            defer { dirs.cleanup() }
            // mount(8) runs /sbin/mount.fuse.<subtype> SOURCE TARGET -o OPTIONS,
            // with its own PATH; _netdev is one of the fstab-only options the
            // helper must drop.
            let options = "_netdev,endpoint=\(endpoint),anonymous,cache_dir=\(dirs.cacheDir),log_file=\(dirs.logFile)"
            let helper = prefix + "/sbin/mount.fuse.bucketfs"
            let mounted = try await Tools.run(
                "/usr/bin/env", ["PATH=\(Self.mountHelperPath)", helper, "gs://\(MountEnv.bucket)/\(objectPrefix)", dirs.path, "-o", options])
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
