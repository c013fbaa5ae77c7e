/**
 * The confirmation dialog (useConfirm): a modal <dialog> named by its question, where Escape — which the
 * browser turns into the dialog's `cancel` event — answers no, the confirm button answers yes, and
 * `ask()` runs its action only on yes. happy-dom does not turn the key into the event itself, so the test
 * sends the event the browser would; Chromium's own handling is in the browser suites.
 */
import { act, fireEvent, render, screen } from '@testing-library/preact';
import { describe, expect, it, vi } from 'vitest';
import { useConfirm } from './confirm-dialog.tsx';

/** A page with one destructive button that asks first. */
function Page(props: { onAnswer?: (yes: boolean) => void; action?: () => void }) {
  const { confirm, ask, dialog } = useConfirm();
  return (
    <>
      <button
        type="button"
        onClick={async () => {
          if (props.action) await ask('Delete web-1?', 'It is gone for good.', 'Delete', props.action);
          else props.onAnswer?.(await confirm('Delete web-1?', 'It is gone for good.', 'Delete'));
        }}
      >
        Delete web-1
      </button>
      {dialog}
    </>
  );
}

const settle = () => act(() => new Promise<void>((resolve) => setImmediate(resolve)));

async function openDialog(): Promise<HTMLDialogElement> {
  fireEvent.click(screen.getByRole('button', { name: 'Delete web-1' }));
  await settle();
  return screen.getByRole('dialog', { name: 'Delete web-1?' }) as HTMLDialogElement;
}

describe('confirm dialog', () => {
  it('opens modal, named by the question, with the consequence and both choices', async () => {
    render(<Page onAnswer={() => {}} />);
    expect(screen.queryByRole('dialog')).toBeNull();
    const dialog = await openDialog();
    expect(dialog.open).toBe(true);
    expect(dialog.textContent).toContain('It is gone for good.');
    const buttons = [...dialog.querySelectorAll('button')].map((button) => button.textContent);
    // Cancel comes first: Tab from the question reaches the safe choice before the destructive one.
    expect(buttons).toEqual(['Cancel', 'Delete']);
  });

  it('Escape (the cancel event) answers no, without the browser closing the dialog behind Preact', async () => {
    const answers: boolean[] = [];
    render(<Page onAnswer={(yes) => answers.push(yes)} />);
    const dialog = await openDialog();
    const cancel = new Event('cancel', { cancelable: true });
    dialog.dispatchEvent(cancel);
    await settle();
    expect(cancel.defaultPrevented).toBe(true);
    expect(answers).toEqual([false]);
    expect(screen.queryByRole('dialog')).toBeNull();
  });

  it('the confirm button answers yes; Cancel answers no; each question is answered once', async () => {
    const answers: boolean[] = [];
    render(<Page onAnswer={(yes) => answers.push(yes)} />);
    await openDialog();
    fireEvent.click(screen.getByRole('button', { name: 'Delete', exact: true }));
    await settle();
    expect(screen.queryByRole('dialog')).toBeNull();
    await openDialog();
    fireEvent.click(screen.getByRole('button', { name: 'Cancel' }));
    await settle();
    expect(answers).toEqual([true, false]);
  });

  it('ask() runs the action only on yes', async () => {
    const action = vi.fn();
    render(<Page action={action} />);
    const dialog = await openDialog();
    dialog.dispatchEvent(new Event('cancel', { cancelable: true }));
    await settle();
    expect(action).not.toHaveBeenCalled();
    await openDialog();
    fireEvent.click(screen.getByRole('button', { name: 'Delete', exact: true }));
    await settle();
    expect(action).toHaveBeenCalledTimes(1);
  });
});
