/**
 * A tiny PNG decoder for screenshots: 8-bit RGB or RGBA, non-interlaced (what Chromium writes), with node:zlib.
 * Enough to count pixels of a colour; anything else is refused with a clear error.
 */
import { inflateSync } from 'node:zlib';

export interface DecodedPng {
  width: number;
  height: number;
  /** RGBA, 4 bytes per pixel, row after row. */
  rgba: Uint8Array;
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export function decodePng(file: Buffer): DecodedPng {
  if (!file.subarray(0, 8).equals(SIGNATURE)) throw new Error('not a PNG file');
  let offset = 8;
  let header: { width: number; height: number; bitDepth: number; colorType: number; interlace: number } | null = null;
  const data: Buffer[] = [];
  while (offset < file.length) {
    const length = file.readUInt32BE(offset);
    const type = file.toString('latin1', offset + 4, offset + 8);
    const body = file.subarray(offset + 8, offset + 8 + length);
    offset += 12 + length;
    if (type === 'IHDR') {
      header = {
        width: body.readUInt32BE(0),
        height: body.readUInt32BE(4),
        bitDepth: body[8]!,
        colorType: body[9]!,
        interlace: body[12]!,
      };
    } else if (type === 'IDAT') {
      data.push(body);
    } else if (type === 'IEND') {
      break;
    }
  }
  if (!header) throw new Error('PNG without IHDR');
  const channels = header.colorType === 6 ? 4 : header.colorType === 2 ? 3 : 0;
  if (header.bitDepth !== 8 || channels === 0 || header.interlace !== 0) {
    throw new Error(
      `unsupported PNG: bit depth ${header.bitDepth}, colour type ${header.colorType}, interlace ${header.interlace}`,
    );
  }
  const { width, height } = header;
  const raw = inflateSync(Buffer.concat(data));
  const stride = width * channels;
  if (raw.length !== height * (stride + 1))
    throw new Error(`PNG data has ${raw.length} bytes, expected ${height * (stride + 1)}`);
  const rows = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const out = y * stride;
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? rows[out + x - channels]! : 0;
      const b = y > 0 ? rows[out - stride + x]! : 0;
      const c = x >= channels && y > 0 ? rows[out - stride + x - channels]! : 0;
      let predictor: number;
      switch (filter) {
        case 0:
          predictor = 0;
          break;
        case 1:
          predictor = a;
          break;
        case 2:
          predictor = b;
          break;
        case 3:
          predictor = (a + b) >> 1;
          break;
        case 4: {
          const p = a + b - c;
          const pa = Math.abs(p - a);
          const pb = Math.abs(p - b);
          const pc = Math.abs(p - c);
          predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default:
          throw new Error(`unknown PNG filter ${filter} on row ${y}`);
      }
      rows[out + x] = (line[x]! + predictor) & 0xff;
    }
  }
  if (channels === 4) return { width, height, rgba: rows };
  const rgba = new Uint8Array(width * height * 4);
  for (let i = 0, j = 0; i < rows.length; i += 3, j += 4) {
    rgba[j] = rows[i]!;
    rgba[j + 1] = rows[i + 1]!;
    rgba[j + 2] = rows[i + 2]!;
    rgba[j + 3] = 255;
  }
  return { width, height, rgba };
}

/** Pixels within `tolerance` (per channel) of the colour `#rrggbb`. */
export function countColor(png: DecodedPng, hex: string, tolerance = 2): number {
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)) as [number, number, number];
  let count = 0;
  for (let i = 0; i < png.rgba.length; i += 4) {
    if (
      Math.abs(png.rgba[i]! - r) <= tolerance &&
      Math.abs(png.rgba[i + 1]! - g) <= tolerance &&
      Math.abs(png.rgba[i + 2]! - b) <= tolerance
    )
      count++;
  }
  return count;
}

/** How many distinct colours the image has (a blank page has one or two). */
export function distinctColors(png: DecodedPng): number {
  const seen = new Set<number>();
  for (let i = 0; i < png.rgba.length; i += 4)
    seen.add((png.rgba[i]! << 16) | (png.rgba[i + 1]! << 8) | png.rgba[i + 2]!);
  return seen.size;
}
