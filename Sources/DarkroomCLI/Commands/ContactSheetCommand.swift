import DarkroomClient
import DarkroomImage
import DarkroomProtocol
import DarkroomZMQ
import Foundation

/// `darkroom contact-sheet`: the latest thumbnails in a grid, one JPEG to look at.
enum ContactSheetCommand {
    static let spec = CommandSpec(
        name: "contact-sheet",
        abstract: "Make a grid of the latest thumbnails as one JPEG.",
        options: [
            .value("output", short: "o", "FILE", help: "Where to write the sheet: a .jpg or .png file.", default: "contact-sheet.jpg"),
            .value("limit", short: "n", "N", help: "How many of the latest records.", default: "24"),
            .value("columns", "N", help: "Thumbnails per row.", default: "6"),
            .value("cell", "PIXELS", help: "Size of each cell.", default: "256"),
            ClientOptions.store,
            ClientOptions.timeout,
            ClientOptions.curveKey, ClientOptions.storeServerKey, ClientOptions.storeKey,
        ]
    )

    static func run(_ args: ParsedArguments) throws -> Int32 {
        let output = args.value("output") ?? "contact-sheet.jpg"
        // The file is what its name says: a .png name gets a PNG, a name
        // with no extension a JPEG, another extension is refused.
        let ext = (output as NSString).pathExtension.lowercased()
        guard ["", "jpg", "jpeg", "png"].contains(ext) else {
            throw UsageError("--output \(output): a contact sheet is written as JPEG (.jpg, .jpeg) or PNG (.png)")
        }
        let limit = try args.int("limit", default: 24, range: 1...1000)
        let columns = try args.int("columns", default: 6, range: 1...100)
        let cell = try args.int("cell", default: 256, range: 16...2048)
        let context = try Context()
        let client: StoreClient
        let records: [RecordInfo]
        do {
            client = try StoreClient(endpoint: ClientOptions.storeEndpoint(args), context: context, timeout: try ClientOptions.timeout(args), curve: try ClientOptions.storeCurve(args))
            records = try client.list(limit: limit)
        } catch {
            throw error.runtime
        }
        guard !records.isEmpty else { throw RuntimeError("the storage node has no records yet; submit some jobs first") }
        var thumbnails: [Image] = []
        // Each thumbnail's colour profile (nil: none), to give the sheet the
        // one they share.
        var profiles: [[UInt8]?] = []
        for record in records {
            do {
                let (_, bytes) = try client.get(record.id, variant: .thumbnail)
                // Any format a worker writes, read as a source is; its RGB
                // profile, as outputs carry it.
                let header = try Source.readHeader(bytes)
                thumbnails.append(try Source.decode(bytes, header: header))
                profiles.append(header.rgbProfile)
            } catch {
                Console.err("skipping \(record.id): \(error)")
            }
        }
        let sheet = try ContactSheet.make(thumbnails, columns: columns, cell: cell)
        // Pixels are never converted between profiles: a sheet of thumbnails
        // that share one carries it; of mixed ones, none.
        let shared = profiles.first.flatMap { first in profiles.allSatisfy { $0 == first } ? first : nil }
        if profiles.contains(where: { $0 != nil }) && shared == nil {
            Console.err("the thumbnails carry different colour profiles (or some none); the sheet carries none, so some may look off in colour")
        }
        let bytes = ext == "png" ? try PNG.encode(sheet, iccProfile: shared)
            : try JPEG.encode(sheet, options: EncodeOptions(quality: 85, iccProfile: shared))
        try OutputFile.write(bytes, to: output)
        Console.err("wrote \(output): \(thumbnails.count) thumbnails, \(sheet.width)x\(sheet.height)")
        return 0
    }
}

/// Lays images out in a grid on a dark background, each fitted into its cell.
enum ContactSheet {
    static func make(_ images: [Image], columns: Int, cell: Int, gap: Int = 8) throws -> Image {
        let cols = max(1, min(columns, images.count))
        let rows = (images.count + cols - 1) / cols
        let width = cols * cell + (cols + 1) * gap
        let height = rows * cell + (rows + 1) * gap
        var sheet = Image(width: width, height: height, red: 24, green: 24, blue: 28)
        for (i, image) in images.enumerated() {
            let fitted = try image.scaled(to: Size(width: cell, height: cell), mode: .fit)
            let x0 = gap + (i % cols) * (cell + gap) + (cell - fitted.width) / 2
            let y0 = gap + (i / cols) * (cell + gap) + (cell - fitted.height) / 2
            for y in 0..<fitted.height {
                let src = y * fitted.stride
                let dst = (y0 + y) * sheet.stride + x0 * Image.bytesPerPixel
                sheet.pixels.replaceSubrange(dst..<(dst + fitted.stride), with: fitted.pixels[src..<(src + fitted.stride)])
            }
        }
        return sheet
    }
}
