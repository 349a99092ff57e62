//! Placeholder written by the lead so the workspace loads; the chaos-suite engineer replaces it.
