import Foundation
import Testing
@testable import StorageKit

/// References and paths: the seeds' examples, normalisation, the object
/// name limits and URL parsing.
@Suite struct PathTests {
    let storage = Storage(bucket: "my-bucket")

    // MARK: the seeds' examples

    @Test func seedsReferenceChains() throws {
        let storageRef = storage.reference()
        #expect(storageRef.fullPath == "")
        #expect(storageRef.name == "")
        #expect(storageRef.bucket == "my-bucket")

        let imagesRef = storageRef.child("images")
        #expect(imagesRef.fullPath == "images")
        var spaceRef = storageRef.child("images/space.jpg")
        #expect(spaceRef.fullPath == "images/space.jpg")
        #expect(imagesRef.fullPath == "images", "child does not change the receiver")
        spaceRef = storage.reference(forURL: "gs://my-bucket/images/space.jpg")
        #expect(spaceRef == storageRef.child("images/space.jpg"))

        #expect(spaceRef.parent() == imagesRef)
        #expect(spaceRef.root() == storageRef)
        #expect(spaceRef.root().fullPath == "")

        let earthRef = spaceRef.parent()?.child("earth.jpg")
        #expect(earthRef?.fullPath == "images/earth.jpg")
        #expect(spaceRef.root().parent() == nil)

        #expect(spaceRef.fullPath == "images/space.jpg")
        #expect(spaceRef.name == "space.jpg")
        #expect(spaceRef.bucket == "my-bucket")
    }

    @Test func seedsFullExample() {
        let storageRef = storage.reference()
        let imagesRef = storageRef.child("images")
        let fileName = "space.jpg"
        let spaceRef = imagesRef.child(fileName)
        #expect(spaceRef.fullPath == "images/space.jpg")
        #expect(spaceRef.name == "space.jpg")
        #expect(spaceRef.parent() == imagesRef)
        #expect(spaceRef.parent()?.parent() == storageRef)
        #expect(spaceRef.parent()?.parent()?.parent() == nil)
    }

    @Test func sameNameInDifferentDirectories() {
        let mountainsRef = storage.reference().child("mountains.jpg")
        let mountainImagesRef = storage.reference().child("images/mountains.jpg")
        #expect(mountainsRef.name == mountainImagesRef.name)
        #expect(mountainsRef.fullPath != mountainImagesRef.fullPath)
        #expect(mountainsRef != mountainImagesRef)
    }

    @Test func descriptionIsAGsURL() {
        #expect(storage.reference().child("images/space.jpg").description == "gs://my-bucket/images/space.jpg")
        #expect(storage.reference().description == "gs://my-bucket/")
    }

    @Test func equalityIsByBucketAndPath() {
        let other = Storage(bucket: "my-bucket")
        let elsewhere = Storage(bucket: "other-bucket")
        let a = storage.reference().child("a/b")
        #expect(a == other.reference().child("a").child("b"))
        #expect(a.hashValue == other.reference().child("a/b").hashValue)
        #expect(a != elsewhere.reference().child("a/b"))
        #expect(Set([a, other.reference().child("a//b/")]).count == 1)
    }

    // MARK: normalisation

    @Test(arguments: [
        ("foo///bar", "foo/bar"), ("/foo/bar/", "foo/bar"), ("//", ""), ("", ""), ("a", "a"),
        ("a/b/c", "a/b/c"), ("/a//b///c//", "a/b/c"), ("./..", "./.."), ("é//ü/ß", "é/ü/ß"), ("a/b//", "a/b"),
    ])
    func normalisation(input: String, expected: String) {
        #expect(StoragePath(input).fullPath == expected)
        #expect(storage.reference().child(input).fullPath == expected)
    }

    @Test func emptySegmentsAreFoundAnywhere() {
        for name in ["a//b", "//a", "a//", "é//", "x/y/z//w", "//"] { #expect(StoragePath.hasEmptySegment(name), "\(name)") }
        for name in ["", "/", "a/b", "/a/", "é/ü", "a/b/c"] { #expect(!StoragePath.hasEmptySegment(name), "\(name)") }
    }

    @Test func childWithSlashesIsSeveralLevels() {
        let ref = storage.reference().child("a").child("b/c/").child("/d")
        #expect(ref.fullPath == "a/b/c/d")
        #expect(ref.parent()?.fullPath == "a/b/c")
        #expect(ref.parent()?.parent()?.parent()?.fullPath == "a")
        #expect(ref.parent()?.parent()?.parent()?.parent()?.fullPath == "")
        #expect(ref.child("").fullPath == "a/b/c/d")
        #expect(ref.child("//").fullPath == "a/b/c/d")
    }

    @Test func pathBasics() {
        let root = StoragePath("")
        #expect(root.isRoot)
        #expect(root.parent == nil)
        #expect(root.name == "")
        #expect(root.listingPrefix == "")
        let p = StoragePath("x/y/z.txt")
        #expect(!p.isRoot)
        #expect(p.name == "z.txt")
        #expect(p.parent == StoragePath("x/y"))
        #expect(StoragePath("x").parent == root)
        #expect(p.listingPrefix == "x/y/z.txt/")
        #expect(p.segments == ["x", "y", "z.txt"])
        #expect(StoragePath("x").contains(p))
        #expect(!StoragePath("x/y/z").contains(p))
        #expect(root.contains(p))
    }

    // MARK: limits

    @Test func limits() throws {
        try StoragePath(String(repeating: "a", count: 1024)).validateForObject()
        #expect(throws: StorageError.self) { try StoragePath(String(repeating: "a", count: 1025)).validateForObject() }
        // 341 × "€" (3 bytes each) = 1023 bytes, + "é" (2 bytes) = 1025 bytes
        // in 342 characters: the limit counts bytes.
        let multiByte = String(repeating: "€", count: 341) + "é"
        #expect(multiByte.count == 342)
        #expect(throws: StorageError.self) { try StoragePath(multiByte).validateForObject() }
        try StoragePath(String(repeating: "€", count: 341)).validateForObject()
        // A path of 1024 bytes with slashes is fine.
        try StoragePath(String(repeating: "a/", count: 511) + "bc").validateForObject()
        try StoragePath("#[]*?").validateForObject()
    }

    @Test(arguments: ["a\nb", "a\rb", "a\r\nb", "dir/\n"])
    func crAndLFAreRejected(path: String) {
        #expect(throws: StorageError.self) { try StoragePath(path).validateForObject() }
    }

    @Test func rootIsNotAnObject() {
        do {
            try StoragePath("").validateForObject()
            Issue.record("the root must be rejected")
        } catch {
            guard case .invalidArgument = error else {
                Issue.record("expected invalidArgument, got \(error)")
                return
            }
        }
        #expect(throws: StorageError.self) { try StoragePath("///").validateForObject() }
    }

    // MARK: URLs

    @Test(arguments: [
        ("gs://my-bucket/images/space.jpg", "my-bucket", "images/space.jpg"),
        ("gs://my-bucket", "my-bucket", ""),
        ("gs://my-bucket/", "my-bucket", ""),
        ("gs://my-bucket//a//b/", "my-bucket", "a/b"),
        ("gs://my-bucket/what?#is%20this", "my-bucket", "what?#is%20this"),
        ("https://firebasestorage.googleapis.com/v0/b/my-bucket/o/path%2Fwith%2Fslashes", "my-bucket", "path/with/slashes"),
        ("https://firebasestorage.googleapis.com/v0/b/my-bucket/o/images%2Fspace.jpg?alt=media&token=abc", "my-bucket", "images/space.jpg"),
        ("https://firebasestorage.googleapis.com/v0/b/proj.appspot.com/o", "proj.appspot.com", ""),
        ("http://127.0.0.1:9199/v0/b/my-bucket/o/a%20b%3F", "my-bucket", "a b?"),
        ("https://storage.googleapis.com/my-bucket/path/to/obj", "my-bucket", "path/to/obj"),
        ("https://storage.googleapis.com/my-bucket/sp%20ace/x%2Fy", "my-bucket", "sp ace/x/y"),
        ("https://storage.googleapis.com/my-bucket", "my-bucket", ""),
        ("https://my-bucket.storage.googleapis.com/a/b", "my-bucket", "a/b"),
        ("https://storage.googleapis.com/storage/v1/b/my-bucket/o/a%2Fb", "my-bucket", "a/b"),
        ("GS://my-bucket/x", "my-bucket", "x"),
    ])
    func urlParsing(url: String, bucket: String, path: String) throws {
        let parsed = try StorageURL.parse(url)
        #expect(parsed.bucket == bucket)
        #expect(parsed.path == path)
    }

    @Test(arguments: [
        "my-bucket/images/space.jpg", "gs://", "gs:///x", "ftp://my-bucket/x", "https://example.com/my-bucket/x",
        "https://firebasestorage.googleapis.com/v0/b/my-bucket/x/y", "https://storage.googleapis.com/",
        "https://firebasestorage.googleapis.com/v0/b/my-bucket/o/bad%zz", "",
    ])
    func badURLsAreInvalidArguments(url: String) {
        do {
            _ = try StorageURL.parse(url)
            Issue.record("\(url) must not parse")
        } catch {
            guard case .invalidArgument = error else {
                Issue.record("expected invalidArgument, got \(error)")
                return
            }
        }
    }

    @Test func referenceForURL() throws {
        let ref = storage.reference(forURL: "https://firebasestorage.googleapis.com/v0/b/my-bucket/o/a%2Fb.txt")
        #expect(ref.fullPath == "a/b.txt")
        #expect(ref.name == "b.txt")
        #expect(ref.isUsable)
        #expect(try storage.reference(validatingURL: "gs://my-bucket/a/b.txt") == ref)
        #expect(try storage.reference(for: URL(string: "gs://my-bucket/a/b.txt")!) == ref)
        #expect(throws: StorageError.self) { try storage.reference(validatingURL: "gs://other-bucket/a") }
        #expect(throws: StorageError.self) { try storage.reference(validatingURL: "not a url") }
    }

    /// Firebase traps on these; StorageKit gives a reference that refuses
    /// every operation, as do all references derived from it.
    @Test func invalidURLGivesAnUnusableReference() async throws {
        // Nothing listens on port 9: a request that went out would fail
        // with retryLimitExceeded, not invalidArgument.
        let storage = Storage(bucket: "my-bucket", configuration: StorageConfiguration(
            endpoint: URL(string: "http://127.0.0.1:9")!, transport: TestEnv.transport))
        for url in ["gs://other-bucket/images/space.jpg", "images/space.jpg", "ftp://my-bucket/a"] {
            let bad = storage.reference(forURL: url)
            #expect(!bad.isUsable)
            #expect(bad.fullPath == "")
            #expect(bad.description.contains("unusable"))
            for derived in [bad, bad.child("x/y.txt"), bad.child("x").parent()!, bad.child("x").root()] {
                #expect(!derived.isUsable)
                await Self.expectInvalidArgument(mentioning: url) { _ = try await derived.getMetadata() }
                await Self.expectInvalidArgument(mentioning: url) { _ = try await derived.listAll() }
                await Self.expectInvalidArgument(mentioning: url) { try await derived.delete() }
                await Self.expectInvalidArgument(mentioning: url) { _ = try await derived.putDataAsync(Data("x".utf8)) }
                await Self.expectInvalidArgument(mentioning: url) { _ = try await derived.downloadURL() }
            }
            #expect(bad != storage.reference())
            #expect(bad.child("a") != storage.reference().child("a"))
        }
    }

    static func expectInvalidArgument(mentioning text: String, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("expected invalidArgument")
        } catch StorageError.invalidArgument(let message) {
            #expect(message.contains(text), "\(message)")
        } catch {
            Issue.record("expected invalidArgument, got \(error)")
        }
    }
}
