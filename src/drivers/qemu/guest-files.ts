/**
 * The files of the guest that `nimbus admin images build` makes: a busybox initramfs that loads the
 * virtio, fw_cfg and ACPI drivers and hands over to the root disk, and the root disk's configuration —
 * busybox init, dropbear SSH for `lambda` (keys only, no password login, no root login), DHCP, busybox
 * acpid powering off on the ACPI power button, mdev giving disks to group `disk`, and a seed reader that
 * takes the hostname, SSH keys and user data from the seed (seed.ts) as QEMU's fw_cfg hands it over
 * (`opt/nimbus/…`): the same values cloud images read from the NoCloud CD-ROM, without the IDE and
 * CD-ROM drivers, whose probing cost a noticeable share of a boot under TCG.
 *
 * Every script writes what it does to the console (the serial log under the data dir), so an orderly
 * shutdown can be read there. Nothing here is built from user input: the seed's files are read as data.
 */

/** The user SSH logs in as, on every image (docs/design.md, "Instance record"). */
export const GUEST_USER = 'lambda';
export const GUEST_UID = 1000;

/** Kernel modules the initramfs loads (with what they depend on), in this order. */
export const INITRAMFS_MODULES = [
  'virtio_pci',
  'virtio_blk',
  'virtio_net',
  'virtio_balloon',
  'virtio_rng',
  'qemu_fw_cfg',
  'button',
  'evdev',
] as const;

/** Lines the guest prints on the console at these points; the driver and the tests look for them. */
export const CONSOLE_MARKS = {
  ready: 'nimbus-guest: ready',
  shutdown: 'nimbus-guest: orderly shutdown',
  unmounted: 'nimbus-guest: filesystems unmounted, powering off',
  powerButton: 'nimbus-guest: ACPI power button',
} as const;

/** The kernel command line for the built image. */
export const KERNEL_CMDLINE = 'console=ttyS0,115200 panic=-1 loglevel=4 tsc=reliable no_timer_check';

export const INITRAMFS_INIT = `#!/bin/sh
# Nimbus guest initramfs: load the drivers, mount the root disk, hand over to its init.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r module; do
  insmod "/lib/modules/$module" 2>/dev/null
done < /lib/modules/load-order
i=0
while [ ! -b /dev/vda ] && [ "$i" -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
mkdir -p /newroot
if ! mount -t ext4 -o rw,noatime /dev/vda /newroot; then
  echo "nimbus-initramfs: cannot mount the root disk /dev/vda" > /dev/console
  sleep 1
  poweroff -f
fi
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
`;

export const INITTAB = `# Nimbus guest: busybox init
::sysinit:/etc/init.d/rcS
::respawn:/usr/sbin/dropbear -F -R -s -g -w -p 22 -P /run/dropbear.pid
::respawn:/sbin/acpid -f -c /etc/acpi -l /dev/null
::respawn:/sbin/mdev -df
::ctrlaltdel:/sbin/reboot
::shutdown:/etc/init.d/rcK
`;

export const RC_S = `#!/bin/sh
# Nimbus guest: first thing after the kernel hands over.
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
console() { echo "nimbus-guest: $*" > /dev/console; }
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sysfs /sys 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
ln -sf /proc/mounts /etc/mtab
# Device owners and modes (/etc/mdev.conf: disks to group disk); inittab's mdev -d does hot-plugs.
mdev -s &
ip link set lo up

# The seed, as QEMU's fw_cfg hands it over: one file per value under opt/nimbus.
mkdir -p /run/seed /var/lib/nimbus
fwcfg=/sys/firmware/qemu_fw_cfg/by_name/opt/nimbus
if [ -d "$fwcfg" ]; then
  seed=/run/seed
  for item in instance-id hostname authorized_keys user-data; do
    [ -r "$fwcfg/$item/raw" ] && cat "$fwcfg/$item/raw" > "$seed/$item"
  done
  chmod 600 "$seed"/*
  if [ -s "$seed/hostname" ]; then
    hostname -F "$seed/hostname"
    cp "$seed/hostname" /etc/hostname
  fi
  if [ -f "$seed/authorized_keys" ]; then
    mkdir -p /home/lambda/.ssh
    cp "$seed/authorized_keys" /home/lambda/.ssh/authorized_keys
    chown -R ${GUEST_UID}:${GUEST_UID} /home/lambda/.ssh
    chmod 700 /home/lambda/.ssh
    chmod 600 /home/lambda/.ssh/authorized_keys
  fi
  id=$(cat "$seed/instance-id" 2>/dev/null)
  if [ -n "$id" ] && [ "$id" != "$(cat /var/lib/nimbus/instance-id 2>/dev/null)" ]; then
    # First boot of this instance: keep its user data, and run it once when it is a script.
    echo "$id" > /var/lib/nimbus/instance-id
    if [ -f "$seed/user-data" ]; then
      cp "$seed/user-data" /var/lib/nimbus/user-data
      chmod 600 /var/lib/nimbus/user-data
      if [ "$(head -c 2 /var/lib/nimbus/user-data)" = "#!" ]; then
        chmod 700 /var/lib/nimbus/user-data
        console "running user data"
        /var/lib/nimbus/user-data > /var/log/user-data.log 2>&1 &
      fi
    fi
  fi
  rm -f "$seed"/*
else
  [ -s /etc/hostname ] && hostname -F /etc/hostname
  console "no seed found"
fi

# The root disk may be larger than the image's filesystem (the type's storage): grow it, online.
resize2fs /dev/vda > /dev/null 2>&1 &

ip link set eth0 up
udhcpc -i eth0 -s /etc/udhcpc.script -t 20 -T 1 -A 1 -b -S > /dev/null 2>&1
mkdir -p /etc/dropbear
console "ready (hostname $(hostname), address $(ip -4 -o addr show dev eth0 | awk '{print $4}'))"
`;

export const RC_K = `#!/bin/sh
# Nimbus guest: run by init when the machine shuts down or reboots.
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
echo "nimbus-guest: orderly shutdown: stopping services" > /dev/console
killall dropbear udhcpc acpid > /dev/null 2>&1
sync
umount -a -r > /dev/null 2>&1
echo "${CONSOLE_MARKS.unmounted}" > /dev/console
`;

export const POWER_BUTTON = `#!/bin/sh
echo "${CONSOLE_MARKS.powerButton}: powering off" > /dev/console
exec /sbin/poweroff
`;

export const UDHCPC_SCRIPT = `#!/bin/sh
# busybox udhcpc hook: configure the interface from the lease QEMU's user-mode network hands out.
case "$1" in
  deconfig)
    ip addr flush dev "$interface"
    ip link set "$interface" up
    ;;
  bound|renew)
    ip addr flush dev "$interface"
    ip addr add "$ip/\${mask:-24}" dev "$interface"
    if [ -n "$router" ]; then
      ip route replace default via "\${router%% *}" dev "$interface"
    fi
    : > /etc/resolv.conf
    for server in $dns; do echo "nameserver $server" >> /etc/resolv.conf; done
    ;;
esac
exit 0
`;

export const PASSWD = `root:x:0:0:root:/root:/bin/sh
${GUEST_USER}:x:${GUEST_UID}:${GUEST_UID}:${GUEST_USER}:/home/${GUEST_USER}:/bin/sh
`;

// '*': no password can match; dropbear takes keys only (-s) and no root at all (-w).
export const SHADOW = `root:*:19000:0:99999:7:::
${GUEST_USER}:*:19000:0:99999:7:::
`;

export const GROUP = `root:x:0:
tty:x:5:
disk:x:6:${GUEST_USER}
${GUEST_USER}:x:${GUEST_UID}:
`;

export const SHELLS = '/bin/sh\n/bin/ash\n';

/** busybox mdev rules: virtio disks and the CD-ROM belong to group disk (lambda is in it). */
export const MDEV_CONF = `vd[a-z]+[0-9]* root:disk 660
sr[0-9]+ root:disk 660
null root:root 666
zero root:root 666
full root:root 666
random root:root 666
urandom root:root 666
tty root:tty 666
ptmx root:tty 666
`;

export const PROFILE = `export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
export PS1='\\u@\\h:\\w\\$ '
`;

export const NSSWITCH = 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n';

export const HOSTS = '127.0.0.1 localhost\n';
