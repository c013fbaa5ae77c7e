export function NotFoundPage() {
  return (
    <section>
      <h1>Page not found</h1>
      <p>
        This console page does not exist. <a href="/console/instances">Go to Instances</a>.
      </p>
    </section>
  );
}
