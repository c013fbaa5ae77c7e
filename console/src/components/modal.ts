/**
 * `useModal()`: the ref for a native <dialog> that opens as a modal when it mounts (focus moves into it,
 * the page behind is inert, Escape fires its cancel event) and, when the page stops rendering it, closes
 * and gives focus back to what had it before (the button that opened it), so a keyboard user carries on
 * from there instead of from the top of the page.
 */
import { useEffect, useRef } from 'preact/hooks';

export function useModal() {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    const opener = dialog?.ownerDocument.activeElement as HTMLElement | null | undefined;
    dialog?.showModal();
    return () => {
      // While the dialog is open everything else is inert: close it before focusing the opener.
      if (dialog?.open) dialog.close();
      if (opener?.isConnected) opener.focus();
    };
  }, []);
  return ref;
}
