/// Which object names can be files and directories, and how paths join.
///
/// A *path* here is relative to the mount: "" is the root, "a/b" is a file
/// or directory two levels down; the object name is `objectPrefix + path`
/// (plus "/" for a directory's placeholder or listing prefix).
enum PathRules {
    /// GCS limits object names to 1024 bytes of UTF-8.
    static let maximumObjectNameLength = 1024
    /// NAME_MAX for new names, as on local filesystems (a whole object name
    /// may hold 1024 bytes, but tools size their buffers by NAME_MAX).
    static let maximumNameLength = 255

    /// Where parallel uploads keep their temporary parts, at the bucket's
    /// root (`ParallelUploads`): never listed, looked up or created
    /// through the mount.
    static let partsPrefix = ".bucketfs-parts/"

    /// Whether object name `name` is the parts' directory or below it.
    static func isReserved(objectName name: String) -> Bool {
        name.hasPrefix(partsPrefix) || name == partsPrefix.dropLast()
    }

    /// Whether `name` can be one directory entry: non-empty, no "/", not
    /// "." or "..", no NUL (the kernel could not hand it to a program), no
    /// CR/LF (GCS refuses them in object names).
    static func isValidEntryName<S: StringProtocol>(_ name: S) -> Bool {
        if name.isEmpty || name == "." || name == ".." { return false }
        for byte in name.utf8 where byte == UInt8(ascii: "/") || byte == 0 || byte == 0x0A || byte == 0x0D {
            return false
        }
        return true
    }

    /// The child path `name` of directory path `parent`.
    static func join(_ parent: String, _ name: String) -> String {
        parent.isEmpty ? name : parent + "/" + name
    }

    /// The directory containing `path` ("" for top-level names and the root).
    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return String(path[..<slash])
    }

    /// The listing prefix of directory `path` under `objectPrefix`.
    static func listingPrefix(_ objectPrefix: String, _ path: String) -> String {
        path.isEmpty ? objectPrefix : objectPrefix + path + "/"
    }

    /// The entry name of listed prefix `prefix` ("dir/sub/" below "dir/"
    /// is "sub"), or nil if it is not a valid entry name.
    static func entryName(ofPrefix prefix: String, under listed: String) -> Substring? {
        guard prefix.hasPrefix(listed), prefix.hasSuffix("/"), prefix != partsPrefix else { return nil }
        let name = prefix.dropFirst(listed.count).dropLast()
        return isValidEntryName(name) ? name : nil
    }

    /// The entry name of listed object `object` below `listed`, or nil if
    /// that object cannot be a file here.
    static func entryName(ofItem object: String, under listed: String) -> Substring? {
        guard object.hasPrefix(listed) else { return nil }
        let name = object.dropFirst(listed.count)
        return isValidEntryName(name) ? name : nil
    }
}
