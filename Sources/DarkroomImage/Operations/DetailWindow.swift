extension Image {
    /// The window of `size` that shows the most detail: the largest sum of
    /// luma differences between neighbouring pixels (edges and texture), as
    /// imgproxy's smart gravity and libvips' `interesting` crops aim for.
    /// Flat areas (sky, a wall, a studio backdrop) weigh nothing, so a
    /// subject off centre keeps its place in the crop. Ties go to the window
    /// nearest the centre, so a picture without detail is cropped centred.
    ///
    /// The differences are summed on a grid of at most 256 cells a side,
    /// sampling every few pixels on large images, and windows are tried a
    /// cell apart: placement is to within a cell (1/256 of the longer side).
    /// `size` must fit in the image.
    public func detailWindow(_ size: Size, cancellation: CancellationFlag = .never) throws(ImageError) -> Rect {
        try Image.detailWindow(size, in: Size(width: width, height: height), cancellation: cancellation) { i in
            let p = i * Image.bytesPerPixel
            return (77 * Int32(pixels[p]) + 150 * Int32(pixels[p + 1]) + 29 * Int32(pixels[p + 2])) >> 8
        }
    }

    /// `detailWindow` of a picture of `whole` size whose luma at pixel index
    /// `i` (row-major) is `luma(i)`: colour and gray images share it.
    static func detailWindow(_ size: Size, in whole: Size, cancellation: CancellationFlag,
                             luma lumaAt: (Int) -> Int32) throws(ImageError) -> Rect {
        let (width, height) = (whole.width, whole.height)
        guard size.width > 0, size.height > 0, size.width <= width, size.height <= height else {
            throw ImageError(.invalidArgument, "crop size \(size) exceeds image \(width)x\(height)")
        }
        let freeX = width - size.width
        let freeY = height - size.height
        if freeX == 0 && freeY == 0 { return Rect(x: 0, y: 0, width: width, height: height) }

        let cell = max(1, (max(width, height) + 255) / 256)
        let step = max(1, cell / 2)
        let gridWidth = (width + cell - 1) / cell
        let gridHeight = (height + cell - 1) / cell
        // The luma of every `step`-th pixel each way, then each sample's
        // differences from its left and upper neighbours, summed per cell.
        let columns = (width - 1) / step + 1
        let rows = (height - 1) / step + 1
        var luma = [Int32](repeating: 0, count: columns * rows)
        let poll = RowPoll(cancellation, workPerRow: columns * 8)
        for row in 0 ..< rows {
            if poll.stop(at: row) { throw ImageError.cancelled }
            let first = row * step * width
            for column in 0 ..< columns {
                luma[row * columns + column] = lumaAt(first + column * step)
            }
        }
        var detail = [Int](repeating: 0, count: gridWidth * gridHeight)
        for row in 1 ..< max(1, rows) {
            let base = (row * step / cell) * gridWidth
            for column in 1 ..< max(1, columns) {
                let here = luma[row * columns + column]
                let change = abs(here - luma[row * columns + column - 1]) + abs(here - luma[(row - 1) * columns + column])
                detail[base + column * step / cell] += Int(change)
            }
        }

        // Sums over any block of cells from a table of prefix sums.
        var table = [Int](repeating: 0, count: (gridWidth + 1) * (gridHeight + 1))
        for gy in 0 ..< gridHeight {
            var running = 0
            for gx in 0 ..< gridWidth {
                running += detail[gy * gridWidth + gx]
                table[(gy + 1) * (gridWidth + 1) + gx + 1] = table[gy * (gridWidth + 1) + gx + 1] + running
            }
        }
        func sum(_ x0: Int, _ y0: Int, _ x1: Int, _ y1: Int) -> Int {
            let w = gridWidth + 1
            return table[y1 * w + x1] - table[y0 * w + x1] - table[y1 * w + x0] + table[y0 * w + x0]
        }
        func candidates(_ free: Int) -> [Int] {
            Array(Swift.stride(from: 0, to: free, by: cell)) + [free]
        }
        var best = (score: -1, distance: Int.max, x: freeX / 2, y: freeY / 2)
        for top in candidates(freeY) {
            let y0 = top / cell
            let y1 = min(gridHeight, (top + size.height + cell - 1) / cell)
            for left in candidates(freeX) {
                let score = sum(left / cell, y0, min(gridWidth, (left + size.width + cell - 1) / cell), y1)
                let distance = abs(2 * left - freeX) + abs(2 * top - freeY)
                if score > best.score || (score == best.score && distance < best.distance) {
                    best = (score, distance, left, top)
                }
            }
        }
        return Rect(x: best.x, y: best.y, width: size.width, height: size.height)
    }
}

extension GrayImage {
    /// `Image.detailWindow` of the plane.
    public func detailWindow(_ size: Size, cancellation: CancellationFlag = .never) throws(ImageError) -> Rect {
        try Image.detailWindow(size, in: Size(width: width, height: height), cancellation: cancellation) { Int32(pixels[$0]) }
    }
}
