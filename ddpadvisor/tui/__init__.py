"""Textual front end. Only this package imports textual; it computes nothing about causes."""
