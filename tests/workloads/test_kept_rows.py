"""A notebook list's clusters and images, with its offerings and GPU models, come from the
process's catalog rows (portal/catalog/cache.py, `catalog_keeps`): no query of their own once
read, and a change to a cluster or an image is seen by the next list."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.catalog.models import NotebookImage
from portal.catalog.services import notebook_image_update
from portal.cluster.services import cluster_update
from portal.workloads.models import Notebook
from portal.workloads.selectors import notebooks_for
from tests.workloads.conftest import allocation_of, launch

WHOLE = "a100-80gb-whole"


def test_a_notebook_list_s_clusters_and_images_come_from_the_process_rows(
    developer, admin_user, gpu_tenant, dry_cluster, catalog
) -> None:
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog[WHOLE]))

    def notebooks_listed() -> tuple[list[Notebook], list[str]]:
        with CaptureQueriesContext(connection) as queries:
            rows = list(notebooks_for(developer))
            shown = [
                (row.cluster.name, row.image.slug, row.allocation.offering.slug) for row in rows
            ]
        assert shown == [("demo", "minimal-python", WHOLE)]
        return rows, [query["sql"] for query in queries.captured_queries]

    notebooks_listed()
    _rows, statements = notebooks_listed()
    cluster_update(actor=admin_user, cluster=dry_cluster, notebook_ingress_class="nginx")
    image = NotebookImage.objects.get(slug="minimal-python")
    notebook_image_update(
        actor=admin_user, notebook_image=image, description="renamed: seen at once"
    )
    rows, after = notebooks_listed()

    assert len(statements) == 1  # the notebooks; their clusters and images no query
    assert not any(
        '"cluster_cluster"' in sql or '"catalog_notebookimage"' in sql for sql in statements
    )
    assert rows[0].cluster.notebook_ingress_class == "nginx"
    assert rows[0].image.description == "renamed: seen at once"
    assert any('"cluster_cluster"' in sql for sql in after)  # read again: the version moved
    assert rows[0].pk == notebook.pk
