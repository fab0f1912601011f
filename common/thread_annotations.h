// Clang's thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html):
// what a mutex guards and what a function needs held, stated so that the compiler checks
// it. The fuzz build (clang, --config=fuzz in .bazelrc) turns -Wthread-safety into an
// error; under GCC these expand to nothing.
//
//   class Counter {
//     void Add() EXCLUDES(mu_);           // takes mu_ itself
//     void AddLocked() REQUIRES(mu_);     // the caller holds mu_
//     Mutex mu_;
//     int n_ GUARDED_BY(mu_) = 0;
//   };
#ifndef EMBER_COMMON_THREAD_ANNOTATIONS_H_
#define EMBER_COMMON_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define EMBER_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define EMBER_THREAD_ANNOTATION(x)
#endif

// A type whose objects are capabilities (a mutex).
#define CAPABILITY(x) EMBER_THREAD_ANNOTATION(capability(x))
// An RAII type that holds a capability from its construction to its destruction.
#define SCOPED_CAPABILITY EMBER_THREAD_ANNOTATION(scoped_lockable)
// A member read or written only with the capability held.
#define GUARDED_BY(x) EMBER_THREAD_ANNOTATION(guarded_by(x))
// A pointer member whose pointee is read or written only with the capability held.
#define PT_GUARDED_BY(x) EMBER_THREAD_ANNOTATION(pt_guarded_by(x))
// Lock order: this mutex is taken before / after the named ones.
#define ACQUIRED_BEFORE(...) EMBER_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) EMBER_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
// The caller must hold the capabilities (exclusively).
#define REQUIRES(...) EMBER_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// The caller must not hold them (the function takes them itself).
#define EXCLUDES(...) EMBER_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// The function takes / releases the capabilities (this object's when none are named).
#define ACQUIRE(...) EMBER_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) EMBER_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// The function checks at run time that the capability is held.
#define ASSERT_CAPABILITY(x) EMBER_THREAD_ANNOTATION(assert_capability(x))
// The function returns a reference to the capability.
#define RETURN_CAPABILITY(x) EMBER_THREAD_ANNOTATION(lock_returned(x))
// Turns the analysis off for one function; say why beside it.
#define NO_THREAD_SAFETY_ANALYSIS EMBER_THREAD_ANNOTATION(no_thread_safety_analysis)

#endif  // EMBER_COMMON_THREAD_ANNOTATIONS_H_
