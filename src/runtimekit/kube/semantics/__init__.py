"""Kubernetes' own meaning, written once for every component: label selectors (`labels`, and their
text form `labeltext`), naming rules (`names`), int-or-percent values (`intstr`), resource quantities
(`quantity`), a pod's resources from its containers' (`resources`), tolerations (`tolerations`),
node selection (`nodeaffinity`) and owner references (`owners`).

Pure functions and frozen values, no I/O: these modules import `runtimekit.base` and
`runtimekit.kube.objects` only, and never the API-server transport (an import-linter contract).
"""
