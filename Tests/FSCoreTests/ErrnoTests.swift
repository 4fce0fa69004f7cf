import Foundation
import Synchronization
import Testing
@testable import FSCore

/// The one errno table (`ErrnoMapping.swift`): one test per row, a check
/// that the rows cover every (failure, operation) pair once, and a scan
/// that no other file of FSCore chooses an errno.
@Suite("errno mapping")
struct ErrnoTests {
    /// A row of `errno(for:during:)`: a failure, the operations it applies to, the errno.
    struct Row: Sendable, CustomTestStringConvertible {
        let error: StoreError
        let operations: [StoreOperation]
        let errno: Int32
        var testDescription: String { "\(error) during \(operations.map(\.rawValue).joined(separator: ",")) → \(errno)" }
    }

    static let all = StoreOperation.allCases
    static func all(but excluded: StoreOperation...) -> [StoreOperation] { all.filter { !excluded.contains($0) } }

    static let rows: [Row] = [
        Row(error: .notFound("x"), operations: all(but: .upload, .directoryRename), errno: ENOENT),
        Row(error: .notFound("x"), operations: [.upload], errno: EIO),
        Row(error: .notFound("x"), operations: [.directoryRename], errno: EIO),
        Row(error: .bucketNotFound("b"), operations: all, errno: EIO),
        Row(error: .preconditionFailed("p"), operations: all, errno: ESTALE),
        Row(error: .unauthenticated("u"), operations: all, errno: EACCES),
        Row(error: .permissionDenied("d"), operations: all, errno: EACCES),
        Row(error: .invalidArgument("i"), operations: [.upload], errno: EIO),
        Row(error: .invalidArgument("i"), operations: all(but: .upload), errno: EINVAL),
        Row(error: .unavailable("503"), operations: all, errno: EIO),
        Row(error: .quotaExceeded("429"), operations: [.upload], errno: EIO),
        Row(error: .quotaExceeded("429"), operations: all(but: .upload), errno: EAGAIN),
        Row(error: .cancelled, operations: all, errno: EINTR),
        Row(error: .other("?"), operations: all, errno: EIO),
    ]

    // Checks semantics.md#errno-eagain
    @Test(arguments: rows)
    func storeFailuresMapToErrno(row: Row) {
        for operation in row.operations {
            #expect(ErrnoMapping.errno(for: row.error, during: operation).value == row.errno, "\(operation)")
            let fsError = FSError(row.error, during: operation, "stat bucket/x")
            #expect(fsError.errno == row.errno && fsError.message.contains("stat bucket/x") && fsError.message.contains(row.error.description))
        }
    }

    /// Every failure meets every operation in exactly one row, so the table
    /// above is the whole table.
    @Test func theRowsCoverEveryPairOnce() {
        let failures = Set(Self.rows.map { String(describing: $0.error).prefix { $0 != "(" } })
        #expect(failures.count == 10, "\(failures)")
        for failure in failures {
            let operations = Self.rows.filter { String(describing: $0.error).hasPrefix(failure) }.flatMap(\.operations)
            #expect(operations.sorted { $0.rawValue < $1.rawValue } == Self.all.sorted { $0.rawValue < $1.rawValue }, "\(failure)")
        }
    }

    @Test(arguments: [
        (Refusal.notFound, ENOENT), (.exists, EEXIST), (.isDirectory, EISDIR), (.notDirectory, ENOTDIR),
        (.notEmpty, ENOTEMPTY), (.nameTooLong, ENAMETOOLONG), (.invalid, EINVAL), (.badHandle, EBADF),
        (.notPermitted, EPERM), (.readOnly, EROFS), (.tooLarge, EFBIG), (.attributeTooLarge, E2BIG),
        (.crossDevice, EXDEV), (.noAttribute, ENODATA), (.notSupported, EOPNOTSUPP), (.stale, ESTALE),
        (.tryAgain, EAGAIN), (.ioError, EIO), (.bufferTooSmall, ERANGE), (.inappropriateIoctl, ENOTTY),
    ])
    func refusalsMapToErrno(refusal: Refusal, expected: Int32) {
        #expect(refusal.errno == expected)
        #expect(FSError(refusal, "why").errno == expected && FSError(refusal).is(refusal))
    }

    @Test func everyRefusalHasARow() {
        #expect(Refusal.allCases.count == 20)
    }

    /// A full disk or quota reaches the user as such; any other local
    /// failure is an I/O error.
    @Test(arguments: [(ENOSPC, ENOSPC), (EDQUOT, EDQUOT), (EBADF, EIO), (EFAULT, EIO), (EIO, EIO)])
    func localFailuresMapToErrno(code: Int32, expected: Int32) {
        #expect(ErrnoMapping.errno(forLocalFailure: code).value == expected)
    }

    /// Each errno name stands for the C constant of that name (checked
    /// against Glibc's constants here, written out once more on purpose).
    @Test func namesAreTheCConstants() {
        let expected: [ErrnoCode: Int32] = [
            .EPERM: EPERM, .ENOENT: ENOENT, .EINTR: EINTR, .EIO: EIO, .EBADF: EBADF, .EAGAIN: EAGAIN, .EACCES: EACCES,
            .EEXIST: EEXIST, .EXDEV: EXDEV, .ENOTDIR: ENOTDIR, .EISDIR: EISDIR, .EINVAL: EINVAL, .ENOTTY: ENOTTY,
            .EFBIG: EFBIG, .ENOSPC: ENOSPC, .EROFS: EROFS, .ERANGE: ERANGE, .ENAMETOOLONG: ENAMETOOLONG,
            .ENOTEMPTY: ENOTEMPTY, .ENODATA: ENODATA, .EOPNOTSUPP: EOPNOTSUPP, .ESTALE: ESTALE, .EDQUOT: EDQUOT, .E2BIG: E2BIG,
        ]
        #expect(Set(expected.keys) == Set(ErrnoCode.allCases))
        for code in ErrnoCode.allCases {
            #expect(code.value == expected[code], "\(code.name)")
        }
        #expect(Set(ErrnoCode.allCases.map(\.value)).count == ErrnoCode.allCases.count)
    }

    /// Every named errno is one the tables answer: the list of names is the
    /// tables' range, with no name nothing can produce.
    @Test func everyNamedErrnoIsAnsweredByATable() {
        var answered = Set(Refusal.allCases.map(\.code))
        for row in Self.rows {
            for operation in Self.all { answered.insert(ErrnoMapping.errno(for: row.error, during: operation)) }
        }
        for code in [ENOSPC, EDQUOT, EBADF] { answered.insert(ErrnoMapping.errno(forLocalFailure: code)) }
        answered.insert(FSError.interrupted("read").code)
        #expect(answered == Set(ErrnoCode.allCases), "never answered: \(Set(ErrnoCode.allCases).subtracting(answered))")
    }

    /// The upload row for a 429, end to end: past the retry window close
    /// reports EIO (the bytes are in the recovery folder), not EAGAIN.
    @Test func aQuotaFailurePastTheUploadWindowIsAnIOError() async throws {
        let cache = temporaryDirectory("quota")
        defer { removeDirectory(cache) }
        let h = try Harness(options: UploadRetryTests.options(cache, window: 0.3))
        h.store.setFaultHook { operation, _ in operation == .put ? .quotaExceeded("429 rate limit") : nil }
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "limited.txt", mode: 0o644, flags: O_WRONLY)
        _ = try await h.fs.write(entry.attributes.inode, handle: open.handle, offset: 0, data: bytes(1000, seed: 9))
        await expectErrno(EIO) { try await h.fs.flush(entry.attributes.inode, handle: open.handle) }
        try await h.fs.release(entry.attributes.inode, handle: open.handle)
        #expect(RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t")).pending().map(\.entry.object) == ["limited.txt"])
    }
}

/// No file of FSCore but ErrnoMapping.swift names an errno: every errno
/// the core answers is chosen in that one table. FuseBridge names none
/// either, but for the few on its allow-list below.
@Suite struct ErrnoScanTests {
    /// A module's sources, found from this file's path.
    static func sources(_ module: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/\(module)").path
    }

    /// The errno names FuseBridge may use, by file, each with why. None of
    /// them is an answer to the kernel: those are `Refusal` cases or an
    /// `FSError`, whose errnos ErrnoMapping.swift chooses.
    static let bridgeAllowList: [String: Set<String>] = [
        // mountFailureMessage reads stat(2)'s errno after a failed mount to
        // tell the user a dead FUSE mount (ENOTCONN) is in the way: a
        // diagnosis for the CLI's message, never sent to the kernel.
        "FuseSession.swift": ["ENOTCONN"],
    ]

    /// Lines naming an errno as a value, with `file:line`, in every Swift
    /// file of `directory` but `skipped`, leaving out the names `allowed`
    /// for that file. Comments are left out (they explain choices); string
    /// literals are not (an errno name inside one is no errno value, but
    /// none is needed there: `ErrnoCode.name` spells it).
    static func errnoLiterals(
        in directory: String, skipping skipped: Set<String> = ["ErrnoMapping.swift"], allowing allowed: [String: Set<String>] = [:]
    ) throws -> [String] {
        let pattern = try Regex(#"\bE[A-Z0-9]{2,}\b"#)
        var found: [String] = []
        let files = try #require(FileManager.default.enumerator(atPath: directory)).compactMap { $0 as? String }
        for file in files.sorted() where file.hasSuffix(".swift") && !skipped.contains(file) {
            let text = try String(contentsOfFile: directory + "/" + file, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                let names = Set(code.matches(of: pattern).map { String(code[$0.range]) })
                if !names.subtracting(allowed[file] ?? []).isEmpty {
                    found.append("\(file):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        return found
    }

    @Test func noErrnoIsChosenOutsideTheTable() throws {
        let sources = Self.sources("FSCore")
        #expect(FileManager.default.fileExists(atPath: sources + "/ErrnoMapping.swift"), "\(sources)")
        let found = try Self.errnoLiterals(in: sources)
        #expect(found.isEmpty, "errno literals outside ErrnoMapping.swift:\n\(found.joined(separator: "\n"))")
    }

    /// FuseBridge answers with `Refusal` cases and names errnos by
    /// `ErrnoCode.name`; it names no errno of its own but the allow-list's.
    @Test func fuseBridgeNamesNoErrnoButItsAllowList() throws {
        let sources = Self.sources("FuseBridge")
        #expect(FileManager.default.fileExists(atPath: sources + "/Reply.swift"), "\(sources)")
        let found = try Self.errnoLiterals(in: sources, skipping: [], allowing: Self.bridgeAllowList)
        #expect(found.isEmpty, "errno literals in FuseBridge:\n\(found.joined(separator: "\n"))")
        // The allow-list holds nothing the code no longer needs.
        let unfiltered = try Self.errnoLiterals(in: sources, skipping: [])
        for (file, names) in Self.bridgeAllowList {
            for name in names {
                #expect(unfiltered.contains { $0.hasPrefix(file + ":") && $0.contains(name) }, "\(file) no longer names \(name)")
            }
        }
    }

    /// The scan finds what it looks for (so an empty result means
    /// something), and the allow-list lets through only its names.
    @Test func theScanFindsAnErrnoLiteral() throws {
        let directory = temporaryDirectory("scan")
        defer { removeDirectory(directory) }
        try "let a = 1 // EIO in a comment\nthrow FSError(ENOENT, \"x\")\nlet b = EINTR == ENOTCONN\n".write(
            toFile: directory + "/Sample.swift", atomically: true, encoding: .utf8)
        #expect(try Self.errnoLiterals(in: directory) == [
            #"Sample.swift:2: throw FSError(ENOENT, "x")"#, "Sample.swift:3: let b = EINTR == ENOTCONN",
        ])
        #expect(try Self.errnoLiterals(in: directory, allowing: ["Sample.swift": ["ENOENT", "ENOTCONN"]]) == [
            "Sample.swift:3: let b = EINTR == ENOTCONN",
        ])
        #expect(try Self.errnoLiterals(in: directory, allowing: ["Sample.swift": ["ENOENT", "ENOTCONN", "EINTR"]]).isEmpty)
    }
}
