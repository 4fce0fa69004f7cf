// <sys/xattr.h> for the tests (Swift's Glibc module leaves it out): they
// call setxattr/getxattr/listxattr/removexattr directly to check errnos
// precisely. Only test targets import this; the product reaches xattrs
// through libfuse (CFuse).
#ifndef BUCKETFS_CXATTR_SHIM_H
#define BUCKETFS_CXATTR_SHIM_H

#include <sys/types.h>
#include <sys/xattr.h>
#include <errno.h>

#endif
