"""retiming"""
