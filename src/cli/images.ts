/**
 * `nimbus admin images …`: the guest images of the QEMU driver (drivers/qemu/images.ts).
 *
 *   images build [--name NAME] [--force]   build the guest image from Debian packages into NIMBUS_IMAGE_DIR
 *   images list                            the images there (built ones and dropped-in cloud images)
 *
 * The build prints one line per step on stderr (stdout keeps the result, JSON with --json).
 */
import { parseArgs } from 'node:util';
import { buildGuestImage, listImages } from '../drivers/qemu/images.js';
import type { Config } from '../platform/config.js';
import { UsageError } from './admin.js';

export const IMAGES_USAGE = `Usage: nimbus admin images <command> [--json]

Commands:
  build [--name NAME] [--force]   build the guest image (Debian's cloud kernel, busybox, dropbear) into
                                  NIMBUS_IMAGE_DIR; nothing is done when that recipe is already built
  list                            the images the qemu driver can boot`;

export async function runImages(
  argv: string[],
  config: Config,
  output: { out(line: string): void; progress?(line: string): void },
): Promise<void> {
  const [command, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      json: { type: 'boolean', default: false },
      name: { type: 'string' },
      force: { type: 'boolean', default: false },
    },
    strict: true,
  });
  switch (command) {
    case 'build': {
      // A failed build throws ImageBuildError, whose message says what to do (exit 1).
      const result = await buildGuestImage({
        imageDir: config.qemu.imageDir,
        ...(values.name ? { name: values.name } : {}),
        force: values.force === true,
        progress: (line) => (output.progress ?? output.out)(line),
      });
      output.out(
        values.json
          ? JSON.stringify(result)
          : `${result.built ? 'Built' : 'Up to date:'} ${result.name} ${result.version} in ${result.dir}`,
      );
      return;
    }
    case 'list': {
      const images = [...listImages(config.qemu.imageDir).values()];
      output.out(
        values.json
          ? JSON.stringify({ image_dir: config.qemu.imageDir, images })
          : images.length === 0
            ? `No images in ${config.qemu.imageDir}: run "nimbus admin images build"`
            : images
                .map(
                  (i) =>
                    `${i.name.padEnd(20)} ${i.kind === 'nimbus' ? `built ${i.version}` : 'cloud image'}  ${i.root}`,
                )
                .join('\n'),
      );
      return;
    }
    case undefined:
    case 'help':
    case '--help':
      output.out(IMAGES_USAGE);
      return;
    default:
      throw new UsageError(`Unknown images command "${command}"\n\n${IMAGES_USAGE}`);
  }
}
