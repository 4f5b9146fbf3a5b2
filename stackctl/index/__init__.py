"""Package indexes: where they are for this run (`config`), how pages parse (`pages`), the HTTP client
(`client`) and its on-disk cache (`httpcache`)."""

from stackctl.index.client import ClientOptions, IndexClient, ProjectNotFound
from stackctl.index.config import Credentials, IndexEndpoint, endpoints, public_index_url
from stackctl.index.pages import IndexedFile, ProjectListing

__all__ = ["ClientOptions", "Credentials", "IndexClient", "IndexEndpoint", "IndexedFile", "ProjectListing",
           "ProjectNotFound", "endpoints", "public_index_url"]
