/// bucketfs's version: what `bucketfs --version` prints and every
/// request's User-Agent carries. The one place it is written.
public let bucketfsVersion = "0.1.0"
