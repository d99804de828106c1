// swift-tools-version:6.0
//
// Darkroom: a distributed image-processing job queue.
//
// Layers, bottom to top (arrows point down only):
//
//   C wrappers      CJPEG (shim over libjpeg-turbo), CLCMS (shim over Little CMS), CWebP (shim over libwebp), CPNG (shim over libpng), CGIF (shim over giflib), CSQLite, CZeroMQ, CCrypto, CMalloc (system libraries),
//                   CMicroHTTPD, CCurl, CHEIF, CTIFF (loaded on first use, through CLoader)
//   image engine    DarkroomImage     pixels, JPEG, PNG, WebP, GIF, HEIF and TIFF codecs, operations
//   operation layer DarkroomPipeline  pipeline syntax, steps, the compound operation
//   command line    DarkroomCLI       argument parsing, help, every subcommand
//   executable      darkroom          main.swift only calls DarkroomCLI
//   bench tool      darkroom-loadgen  DRK1 load generator for bench/system.sh (ZMQ + Protocol only)
import PackageDescription

let package = Package(
    name: "Darkroom",
    products: [
        .executable(name: "darkroom", targets: ["darkroom"]),
        .executable(name: "darkroom-loadgen", targets: ["darkroom-loadgen"]),
    ],
    targets: [
        // C wrappers: the only places where libjpeg, Little CMS, SQLite, ZeroMQ, libcrypto, libmicrohttpd, libcurl and glibc's malloc controls are named.
        .target(
            name: "CJPEG",
            cSettings: [.unsafeFlags(["-O2"])],
            linkerSettings: [.linkedLibrary("jpeg")]
        ),
        // Little CMS, for converting pixels from an embedded ICC profile to sRGB.
        .target(name: "CLCMS", linkerSettings: [.linkedLibrary("lcms2")]),
        // libwebp, for WebP files, and libwebpmux, for the ICC profile chunk.
        .target(name: "CWebP", linkerSettings: [.linkedLibrary("webp"), .linkedLibrary("webpmux")]),
        // libpng, for PNG sources.
        .target(name: "CPNG", linkerSettings: [.linkedLibrary("png16")]),
        // giflib, for GIF sources (and the GIF fixtures tests write).
        .target(name: "CGIF", linkerSettings: [.linkedLibrary("gif")]),
        // Loading a library on first use (dlopen), shared by the four shims
        // below that do, so that a process that does not need them does not
        // map them and the libraries they bring (see each header). glibc
        // before 2.34 keeps dlopen in libdl; later ones have it in libc and
        // an empty libdl.
        .target(name: "CLoader", linkerSettings: [.linkedLibrary("dl")]),
        // libtiff, for TIFF sources (and the TIFF fixtures tests write).
        .target(name: "CTIFF", dependencies: ["CLoader"]),
        // libheif, for HEIC and AVIF sources (and the HEIF fixtures tests write).
        .target(name: "CHEIF", dependencies: ["CLoader"]),
        .systemLibrary(name: "CSQLite"),
        .systemLibrary(name: "CZeroMQ"),
        // libcrypto (OpenSSL), for SHA-256 on the CPU's SHA instructions.
        .systemLibrary(name: "CCrypto"),
        // libmicrohttpd, for the read-only HTTP listener that serves metrics,
        // and libcurl (OpenSSL flavour), for downloading the web sources of
        // `submit`.
        .target(name: "CMicroHTTPD", dependencies: ["CLoader"]),
        .target(name: "CCurl", dependencies: ["CLoader"]),
        // glibc's malloc controls, so that a server gives back the memory it freed.
        .systemLibrary(name: "CMalloc"),

        // Vocabulary shared by every layer: hashing, logging, services.
        .target(name: "DarkroomCore", dependencies: ["CCrypto", "CMalloc"]),
        // Safe Swift wrappers: every ZeroMQ and SQLite call and every unsafe
        // pointer for them lives in these two modules.
        .target(name: "DarkroomZMQ", dependencies: ["CZeroMQ"]),
        .target(name: "DarkroomSQLite", dependencies: ["CSQLite"]),
        // Prometheus metrics: the text format, and the HTTP listener that
        // serves it (every libmicrohttpd call and its pointers live here).
        .target(name: "DarkroomMetrics", dependencies: ["DarkroomCore", "CMicroHTTPD"]),
        // Downloads over http:// and https:// with limits, a few at a time
        // (every libcurl call and its pointers live here).
        .target(name: "DarkroomFetch", dependencies: ["CCurl"]),

        // Image engine.
        .target(name: "DarkroomImage", dependencies: ["CJPEG", "CLCMS", "CWebP", "CPNG", "CGIF", "CHEIF", "CTIFF"]),
        // Operation layer: pipeline text, typed steps, compound operation.
        .target(name: "DarkroomPipeline", dependencies: ["DarkroomCore", "DarkroomImage"]),
        // Wire protocol DRK1: messages to and from frames, no ZeroMQ dependency.
        .target(name: "DarkroomProtocol"),
        // Worker role: pulls jobs from the broker, runs them, stores the results.
        .target(name: "DarkroomWorker", dependencies: ["DarkroomCore", "DarkroomZMQ", "DarkroomProtocol", "DarkroomPipeline", "DarkroomImage"]),
        // Broker: the durable job queue, leases, heartbeats, retries, events.
        .target(name: "DarkroomBroker", dependencies: ["DarkroomCore", "DarkroomZMQ", "DarkroomSQLite", "DarkroomProtocol", "DarkroomPipeline", "DarkroomImage"]),
        // Storage node: linked full-res and thumbnail records in SQLite, large blobs in files.
        // It reads the header of each image it is sent (DarkroomImage), never the pixels.
        .target(name: "DarkroomStore", dependencies: ["DarkroomCore", "DarkroomZMQ", "DarkroomSQLite", "DarkroomProtocol", "DarkroomImage"]),
        // Client side of DRK1: producer, event follower, admin and store clients.
        .target(name: "DarkroomClient", dependencies: ["DarkroomCore", "DarkroomZMQ", "DarkroomProtocol"]),
        // CURVE key files, the allowlist of client keys and the ZAP handler.
        .target(name: "DarkroomSecurity", dependencies: ["DarkroomCore", "DarkroomZMQ", "DarkroomProtocol"]),
        // Command line.
        .target(
            name: "DarkroomCLI",
            dependencies: [
                "DarkroomCore", "DarkroomImage", "DarkroomPipeline", "DarkroomProtocol", "DarkroomZMQ",
                "DarkroomClient", "DarkroomBroker", "DarkroomStore", "DarkroomWorker", "DarkroomSecurity", "DarkroomMetrics",
                "DarkroomFetch",
            ]
        ),
        .executableTarget(name: "darkroom", dependencies: ["DarkroomCLI"]),
        // Load generator for bench/system.sh: SUBMIT with a window, follow the events.
        .executableTarget(name: "darkroom-loadgen", dependencies: ["DarkroomZMQ", "DarkroomProtocol"]),

        // Test fixtures more than one test target builds files from (PNG files made in code).
        .target(name: "DarkroomFixtures", dependencies: ["CGIF", "CHEIF", "CTIFF"], path: "Tests/DarkroomFixtures"),
        .testTarget(name: "DarkroomCoreTests", dependencies: ["DarkroomCore"]),
        .testTarget(name: "DarkroomImageTests", dependencies: ["DarkroomImage", "DarkroomFixtures", "CLoader"]),
        .testTarget(name: "DarkroomPipelineTests", dependencies: ["DarkroomPipeline", "DarkroomImage", "DarkroomFixtures"]),
        .testTarget(name: "DarkroomCLITests", dependencies: ["DarkroomCore", "DarkroomImage", "DarkroomFixtures", "DarkroomPipeline", "DarkroomProtocol", "DarkroomZMQ", "DarkroomMetrics", "DarkroomClient", "DarkroomSQLite"]),
        .testTarget(name: "DarkroomProtocolTests", dependencies: ["DarkroomProtocol"]),
        .testTarget(name: "DarkroomZMQTests", dependencies: ["DarkroomZMQ"]),
        .testTarget(name: "DarkroomSQLiteTests", dependencies: ["DarkroomSQLite"]),
        .testTarget(name: "DarkroomWorkerTests", dependencies: ["DarkroomWorker", "DarkroomZMQ", "DarkroomProtocol", "DarkroomPipeline", "DarkroomImage"]),
        .testTarget(name: "DarkroomBrokerTests", dependencies: ["DarkroomBroker", "DarkroomZMQ", "DarkroomSQLite", "DarkroomProtocol", "DarkroomPipeline"]),
        .testTarget(name: "DarkroomStoreTests", dependencies: ["DarkroomStore", "DarkroomZMQ", "DarkroomSQLite", "DarkroomProtocol", "DarkroomCore", "DarkroomImage", "DarkroomFixtures"]),
        .testTarget(name: "DarkroomSecurityTests", dependencies: ["DarkroomSecurity", "DarkroomBroker", "DarkroomStore", "DarkroomClient", "DarkroomZMQ", "DarkroomProtocol", "DarkroomCore", "DarkroomImage"]),
        .testTarget(name: "DarkroomClientTests", dependencies: ["DarkroomClient", "DarkroomZMQ", "DarkroomProtocol", "DarkroomCore"]),
        .testTarget(name: "DarkroomMetricsTests", dependencies: ["DarkroomMetrics", "DarkroomCore"]),
        .testTarget(name: "DarkroomFetchTests", dependencies: ["DarkroomFetch"]),
    ]
)
